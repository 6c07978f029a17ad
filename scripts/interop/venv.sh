# Sourced by an interop script as `. "$(dirname "$0")/../venv.sh" PACKAGE...`: sets `here` (the
# script's folder, made the working directory) and `root` (the repository), and installs
# PACKAGE... into the script's own venv, `$here/.venv` (created on first use), as `py`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$here"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check "$@"
py="$here/.venv/bin/python"
