# Source this file (bash) from the project's entry scripts. It
#   1. checks or installs the system packages the build needs (ci/system-deps.sh),
#   2. makes every cargo build link one prebuilt RocksDB (ci/rocksdb-prebuilt.sh),
# and leaves the shell in the repository root.
set -euo pipefail
QSIM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$QSIM_ROOT"
./ci/system-deps.sh
# shellcheck source=ci/rocksdb-prebuilt.sh
source ./ci/rocksdb-prebuilt.sh
qsim_rocksdb_prebuilt
