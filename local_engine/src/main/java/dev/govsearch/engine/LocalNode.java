package dev.govsearch.engine;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.List;
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
 * <p>Usage: {@code LocalNode HOME_DIR HTTP_PORT TRANSPORT_PORT}. The node keeps its data and
 * logs under HOME_DIR, binds 127.0.0.1 only, runs single-node discovery and stops on SIGTERM.
 * The modules are loaded from the classpath, so no plugin installation step exists.
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

    static Settings settings(Path home, int httpPort, int transportPort) {
        return Settings.builder()
            .put("cluster.name", "govsearch-local")
            .put("node.name", "govsearch-local-1")
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("network.host", "127.0.0.1")
            .put("http.port", Integer.toString(httpPort))
            .put("transport.port", Integer.toString(transportPort))
            .put("discovery.type", "single-node")
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("action.auto_create_index", false)
            .put("indices.query.bool.max_clause_count", 4096)
            .build();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: LocalNode HOME_DIR HTTP_PORT TRANSPORT_PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        Files.createDirectories(home.resolve("config"));
        Files.createDirectories(home.resolve("data"));
        Files.createDirectories(home.resolve("logs"));
        Settings settings = settings(home, Integer.parseInt(args[1]), Integer.parseInt(args[2]));
        Environment environment = InternalSettingsPreparer.prepareEnvironment(
            settings, java.util.Map.of(), home.resolve("config"), () -> "govsearch-local-1");
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
