// Progressive enhancement only: every page works without this file.
// A textarea with data-editor becomes a CodeMirror 5 editor (YAML mode), with the loader's
// error lines marked and field-name completion (Ctrl-Space) from the policy JSON Schema.
(function () {
  "use strict";
  function enhance(area) {
    if (!window.CodeMirror || area.dataset.enhanced) return;
    area.dataset.enhanced = "1";
    var words = [];
    try { words = JSON.parse(area.dataset.completions || "[]"); } catch (e) { words = []; }
    function hint(cm) {
      var cur = cm.getCursor(), line = cm.getLine(cur.line);
      var start = cur.ch; while (start > 0 && /[\w-]/.test(line.charAt(start - 1))) start--;
      var prefix = line.slice(start, cur.ch);
      var list = words.filter(function (w) { return w.indexOf(prefix) === 0; }).map(function (w) { return w + ": "; });
      return { list: list, from: CodeMirror.Pos(cur.line, start), to: CodeMirror.Pos(cur.line, cur.ch) };
    }
    var cm = CodeMirror.fromTextArea(area, {
      mode: "yaml", lineNumbers: true, indentUnit: 2, tabSize: 2, smartIndent: true,
      screenReaderLabel: (document.querySelector('label[for="' + area.id + '"]') || {}).textContent || "editor",
      extraKeys: {
        "Ctrl-Space": function (c) { if (c.showHint) c.showHint({ hint: hint, completeSingle: false }); },
        "Tab": function (c) { c.replaceSelection("  "); },
        "Esc": function (c) { c.getInputField().blur(); }
      }
    });
    (area.dataset.errorLines || "").split(",").filter(Boolean).forEach(function (n) {
      var line = parseInt(n, 10) - 1;
      if (line >= 0 && line < cm.lineCount()) cm.addLineClass(line, "background", "cm-error-line");
    });
    area.form && area.form.addEventListener("submit", function () { cm.save(); });
    document.querySelectorAll("li.problem a").forEach(function (a) {
      a.addEventListener("click", function (ev) {
        var line = parseInt(a.parentNode.dataset.line, 10) - 1;
        if (line >= 0) { ev.preventDefault(); cm.focus(); cm.setCursor({ line: line, ch: 0 }); }
      });
    });
  }
  function all() { document.querySelectorAll("textarea[data-editor]").forEach(enhance); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", all); else all();
  document.addEventListener("htmx:afterSettle", all);
})();
