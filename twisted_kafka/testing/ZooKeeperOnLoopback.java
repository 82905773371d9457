// A standalone ZooKeeper (Debian's zookeeper package) whose client port is
// 127.0.0.1:0, for twisted_kafka.testing.zookeeper (EmbeddedCluster and the
// project's own cluster tests).
//
// ZooKeeper's own ZooKeeperServerMain reads clientPort from zoo.cfg, where 0
// means "no client port"; this launcher reads zoo.cfg the same way and then
// asks for loopback port 0, so the kernel picks a free port and no test ever
// chooses one.  The bound port is read from the process's LISTEN socket.
// Run with Java's single-file source launcher:
//
//     java -cp /usr/share/java/zookeeper.jar ZooKeeperOnLoopback.java zoo.cfg
import java.net.InetAddress;
import java.net.InetSocketAddress;

import org.apache.zookeeper.server.ServerConfig;
import org.apache.zookeeper.server.ZooKeeperServerMain;

public class ZooKeeperOnLoopback {
    static final class LoopbackConfig extends ServerConfig {
        LoopbackConfig(String path) throws Exception {
            parse(path);
            clientPortAddress = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);
        }
    }

    public static void main(String[] args) throws Exception {
        new ZooKeeperServerMain().runFromConfig(new LoopbackConfig(args[0]));
    }
}
