#!/bin/bash
# `zkServer.sh start-foreground [zoo.cfg]`: ZooKeeper's server in the foreground, as the
# release's script runs it (the only mode a container needs). JVMFLAGS adds JVM options;
# ZK_SERVER_HEAP is the heap in MB (the release's default, 1000).
set -e
if [[ "${1:-}" != start-foreground ]]; then
    echo "usage: zkServer.sh start-foreground [config]  (the only mode this image runs)" >&2
    exit 2
fi
config="${2:-${ZOOCFG:-$ZOO_CONF_DIR/zoo.cfg}}"
# shellcheck disable=SC2086  # JVMFLAGS holds several options
exec java "-Xmx${ZK_SERVER_HEAP:-1000}m" -XX:+ExitOnOutOfMemoryError -XX:-UsePerfData \
    "-Dzookeeper.log.dir=${ZOO_LOG_DIR:-/logs}" \
    -Dlogback.configurationFile=/opt/zookeeper/logback.xml \
    -Dzookeeper.admin.enableServer="${ZOO_ADMINSERVER_ENABLED:-true}" \
    $JVMFLAGS -cp '/opt/zookeeper/lib/*' \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$config"
