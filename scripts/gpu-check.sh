#!/bin/bash
# Checks devlet against a real NVIDIA GPU: one-shot commands (list, labels,
# metrics, CDI), then `devlet run` served to `devlet probe` and a scrape, next
# to `nvidia-smi -q` for comparison.  Changes no GPU setting.
#   scripts/gpu-check.sh [DEVLET_BINARY] [OUTPUT_DIR]
# NVML is found as devlet finds it; where the driver's library is outside the
# loader's path (e.g. /usr/local/nvidia/lib64), it is named with
# DEVLET_NVML_LIBRARY.
set -u
DEVLET=${1:-build/devlet}
O=${2:-gpu-check-out}
mkdir -p "$O"
if [ -z "${DEVLET_NVML_LIBRARY:-}" ] && ! ldconfig -p | grep -q 'libnvidia-ml.so.1 '; then
        lib=$(find / -xdev -name libnvidia-ml.so.1 2>/dev/null | head -n 1)
        [ -n "$lib" ] && export DEVLET_NVML_LIBRARY=$lib
fi
nvidia-smi -q > "$O/smi-q.txt" 2>&1
{
        echo "== list"; "$DEVLET" list --backends nvidia
        echo "== list json"; "$DEVLET" list --backends nvidia -o json
        echo "== labels"; "$DEVLET" labels --backends nvidia --output-file -
        echo "== metrics"; "$DEVLET" metrics --backends nvidia
        echo "== cdi"; "$DEVLET" cdi generate --backends nvidia --output -
} > "$O/devlet.txt" 2>&1
P=$(mktemp -d)
"$DEVLET" run --backends nvidia --plugin-directory "$P" --metrics-address 127.0.0.1:19400 \
        --collect-interval 1000 --output-file "$P/labels" > "$O/run.log" 2>&1 &
pid=$!
for _ in $(seq 50); do ls "$P"/*.sock > /dev/null 2>&1 && break; sleep 0.1; done
S=$(ls "$P"/*.sock | head -n 1)
{
        id=$("$DEVLET" probe --socket "$S" | grep -o 'GPU-[0-9a-f-]*' | head -n 1)
        "$DEVLET" probe --socket "$S" --allocate "$id" --preferred 1
        sleep 2.5
        echo "== scrape"; curl -s 127.0.0.1:19400/metrics
        echo "== health"; curl -s -i 127.0.0.1:19400/health
} > "$O/probe.txt" 2>&1
kill -TERM "$pid"
wait "$pid"
echo "exit=$?" >> "$O/run.log"
rm -rf "$P"
echo "gpu-check: results in $O (compare devlet.txt and probe.txt with smi-q.txt)"
