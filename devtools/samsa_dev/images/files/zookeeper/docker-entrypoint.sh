#!/bin/bash
# What the official ZooKeeper image's entrypoint does: zoo.cfg from the ZOO_* environment
# (unless $ZOO_CONF_DIR has one), myid from ZOO_MY_ID (unless $ZOO_DATA_DIR has one), then
# the command. This image runs as its user (1000) already, so it never switches users.
set -e

if [[ ! -f "$ZOO_CONF_DIR/zoo.cfg" ]]; then
    CONFIG="$ZOO_CONF_DIR/zoo.cfg"
    {
        echo "dataDir=$ZOO_DATA_DIR"
        echo "dataLogDir=$ZOO_DATA_LOG_DIR"
        echo "tickTime=$ZOO_TICK_TIME"
        echo "initLimit=$ZOO_INIT_LIMIT"
        echo "syncLimit=$ZOO_SYNC_LIMIT"
        echo "autopurge.snapRetainCount=$ZOO_AUTOPURGE_SNAPRETAINCOUNT"
        echo "autopurge.purgeInterval=$ZOO_AUTOPURGE_PURGEINTERVAL"
        echo "maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS"
        echo "standaloneEnabled=$ZOO_STANDALONE_ENABLED"
        echo "admin.enableServer=$ZOO_ADMINSERVER_ENABLED"
    } > "$CONFIG.partial"
    for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do
        echo "$server" >> "$CONFIG.partial"
    done
    if [[ -n $ZOO_4LW_COMMANDS_WHITELIST ]]; then
        echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST" >> "$CONFIG.partial"
    fi
    for extra in $ZOO_CFG_EXTRA; do
        echo "$extra" >> "$CONFIG.partial"
    done
    mv "$CONFIG.partial" "$CONFIG"
fi

if [[ ! -f "$ZOO_DATA_DIR/myid" ]]; then
    echo "${ZOO_MY_ID:-1}" > "$ZOO_DATA_DIR/myid"
fi

exec "$@"
