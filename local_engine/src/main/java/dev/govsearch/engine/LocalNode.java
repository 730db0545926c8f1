package dev.govsearch.engine;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.index.mapper.MapperExtrasPlugin;
import org.opensearch.index.reindex.ReindexPlugin;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.painless.PainlessPlugin;
import org.opensearch.percolator.PercolatorPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.script.mustache.MustachePlugin;
import org.opensearch.transport.Netty4Plugin;

/**
 * One embedded OpenSearch node on loopback, for development and tests.
 *
 * <p>Usage: {@code LocalNode HOME_DIR HTTP_PORT TRANSPORT_PORT [--cluster-name NAME]
 * [--node-name NAME] [--seed-hosts HOST:PORT,...] [--initial-cluster-manager-nodes NAME,...]}.
 * The node keeps its data and logs under HOME_DIR, binds 127.0.0.1 only and stops on SIGTERM.
 * Without seed hosts it runs single-node discovery; with them it joins (or, with the initial
 * cluster-manager nodes, bootstraps) a cluster of several nodes. The modules are loaded from
 * the classpath, so no plugin installation step exists.
 */
public final class LocalNode extends Node {

    static final List<Class<? extends Plugin>> MODULES = List.of(
        Netty4Plugin.class,
        PercolatorPlugin.class,
        CommonAnalysisPlugin.class,
        PainlessPlugin.class,
        MustachePlugin.class,
        MapperExtrasPlugin.class,
        ReindexPlugin.class
    );

    private LocalNode(Environment environment, Collection<Class<? extends Plugin>> modules) {
        super(environment, modules, true);
    }

    /** The optional arguments after the three positional ones, by name (without "--"). */
    static Map<String, String> options(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (int i = 3; i < args.length; i += 2) {
            String name = args[i];
            if (!name.startsWith("--") || i + 1 >= args.length || !OPTIONS.contains(name.substring(2))) {
                throw new IllegalArgumentException("unknown or incomplete option: " + name);
            }
            options.put(name.substring(2), args[i + 1]);
        }
        return options;
    }

    static final List<String> OPTIONS = List.of(
        "cluster-name", "node-name", "seed-hosts", "initial-cluster-manager-nodes");

    static Settings settings(Path home, int httpPort, int transportPort, Map<String, String> options) {
        Settings.Builder builder = Settings.builder()
            .put("cluster.name", options.getOrDefault("cluster-name", "govsearch-local"))
            .put("node.name", options.getOrDefault("node-name", "govsearch-local-1"))
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("network.host", "127.0.0.1")
            .put("http.port", Integer.toString(httpPort))
            .put("transport.port", Integer.toString(transportPort))
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("action.auto_create_index", false)
            .put("indices.query.bool.max_clause_count", 4096);
        String seeds = options.get("seed-hosts");
        if (seeds == null) {
            builder.put("discovery.type", "single-node");
        } else {
            builder.putList("discovery.seed_hosts", List.of(seeds.split(",")));
            String managers = options.get("initial-cluster-manager-nodes");
            if (managers != null) {
                builder.putList("cluster.initial_cluster_manager_nodes", List.of(managers.split(",")));
            }
        }
        return builder.build();
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = null;
        try {
            options = args.length >= 3 ? options(args) : null;
        } catch (IllegalArgumentException e) {
            System.err.println(e.getMessage());
        }
        if (options == null) {
            System.err.println("usage: LocalNode HOME_DIR HTTP_PORT TRANSPORT_PORT [--cluster-name NAME]"
                + " [--node-name NAME] [--seed-hosts HOST:PORT,...] [--initial-cluster-manager-nodes NAME,...]");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Files.createDirectories(home.resolve("config"));
        Files.createDirectories(home.resolve("data"));
        Files.createDirectories(home.resolve("logs"));
        Settings settings = settings(home, Integer.parseInt(args[1]), Integer.parseInt(args[2]), options);
        String nodeName = options.getOrDefault("node-name", "govsearch-local-1");
        Environment environment = InternalSettingsPreparer.prepareEnvironment(
            settings, Map.of(), home.resolve("config"), () -> nodeName);
        LocalNode node = new LocalNode(environment, MODULES);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                stopped.countDown();
            }
        }, "govsearch-local-shutdown"));
        node.start();
        System.out.println("govsearch local engine started on http://127.0.0.1:" + args[1]);
        stopped.await();
    }
}
