#!/bin/bash
# Spark's entrypoint for the pods Spark on Kubernetes makes (the official image's, in short):
# `driver ARGS` runs spark-submit in client mode bound to the pod's address; `executor` runs
# KubernetesExecutorBackend from the SPARK_* environment the driver gives its pods; anything
# else runs as given. tini reaps the JVM's children and forwards signals.
set -eo pipefail

SPARK_CLASSPATH="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}${SPARK_HOME}/jars/*"
if [ -n "$SPARK_EXTRA_CLASSPATH" ]; then
    SPARK_CLASSPATH="$SPARK_CLASSPATH:$SPARK_EXTRA_CLASSPATH"
fi
SPARK_CLASSPATH="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:$SPARK_CLASSPATH"
SPARK_EXECUTOR_JAVA_OPTS=()
for v in $(compgen -v SPARK_JAVA_OPT_ | sort -t_ -k4 -n); do
    SPARK_EXECUTOR_JAVA_OPTS+=("${!v}")
done
export PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON

case "$1" in
    driver)
        shift 1
        CMD=("$SPARK_HOME/bin/spark-submit"
            --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS"
            --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS"
            --deploy-mode client "$@")
        ;;
    executor)
        shift 1
        CMD=("$JAVA_HOME/bin/java" "${SPARK_EXECUTOR_JAVA_OPTS[@]}"
            -Xms"${SPARK_EXECUTOR_MEMORY:-1g}" -Xmx"${SPARK_EXECUTOR_MEMORY:-1g}"
            -cp "$SPARK_CLASSPATH" org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
            --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID"
            --cores "${SPARK_EXECUTOR_CORES:-1}" --app-id "$SPARK_APPLICATION_ID"
            --hostname "$SPARK_EXECUTOR_POD_IP"
            --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}"
            --podName "$SPARK_EXECUTOR_POD_NAME")
        ;;
    *)
        exec "$@"
        ;;
esac
exec /usr/bin/tini -s -- "${CMD[@]}"
