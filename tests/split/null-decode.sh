#!/usr/bin/env bash
# The whole host path of a decode with no GPU (seed notes §08): the split
# build's llama-simple on the null device (MACUDA_DEVICE=null, our runtime
# statically linked; kernels are loaded, launched and logged, not run, so
# the text is not the model's). Two runs that differ only in the number of
# tokens decoded; their difference, per token, is what one decoded token
# costs the host: kernel launches (direct and graph replays), calls into
# the runtime and the time inside them, against the process's time
# (tests/split/per-token.sh measures; CI runs it on a program of ours).
#
#   tests/split/null-decode.sh BIN_DIR MODEL [SHORT LONG]   (default 8 and 40 tokens)
#
# The null device plays a GB202 (sm_120): BIN_DIR must be a split build for
# sm_120a (tests/split/build.sh --arch sm_120a).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1/llama-simple
model=$2
short=${3:-8}
long=${4:-40}
prompt="The history of the graphics processor begins"
exec "$here/per-token.sh" "$(basename "$model")" "$short" "$long" \
    "$bin" -m "$model" -n @N@ -ngl 99 "$prompt"
