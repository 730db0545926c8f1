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
    var marked = [];
    function mark(lines) {
      marked.forEach(function (h) { cm.removeLineClass(h, "background", "cm-error-line"); });
      marked = [];
      lines.forEach(function (n) {
        var line = n - 1;
        if (line >= 0 && line < cm.lineCount()) marked.push(cm.addLineClass(line, "background", "cm-error-line"));
      });
    }
    mark((area.dataset.errorLines || "").split(",").filter(Boolean).map(function (n) { return parseInt(n, 10); }));
    // the loader's verdict as the author types (nothing is saved): lines marked, problems listed
    var check = area.dataset.check, timer = null, live = document.getElementById("live-problems");
    var token = area.form && area.form.querySelector('input[name="csrf"]');
    if (check && token) {
      cm.on("changes", function () {
        clearTimeout(timer);
        timer = setTimeout(function () {
          var body = new URLSearchParams({ csrf: token.value, policy_yaml: cm.getValue() });
          fetch(check, { method: "POST", body: body, credentials: "same-origin" })
            .then(function (r) { return r.ok ? r.json() : { errors: [] }; })
            .then(function (answer) {
              mark(answer.errors.map(function (e) { return e.line; }).filter(Boolean));
              if (!live) return;
              live.textContent = answer.errors.length
                ? answer.errors.map(function (e) { return "line " + e.line + ", column " + e.column + ": " + e.code + " " + e.message; }).join("; ")
                : "The loader finds no problem.";
            });
        }, 500);
      });
    }
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
