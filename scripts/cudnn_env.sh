# Finds a cuDNN 9 for the engine's cuDNN path when the dynamic loader would
# not: source it (bash) before running train or kernels with cuDNN,
#   source scripts/cudnn_env.sh
# The engine dlopens libcudnn.so.9 (kernels/cudnn/cudnn.h). The toolkit's and
# Debian's copies are on the loader's path; the pip wheel's
# (nvidia-cudnn-cu13/-cu12, as on machines set up for PyTorch or JAX) sits in
# site-packages, which the loader does not search. Then this exports
# ENGINE_CUDNN_LIBRARY to the wheel's file and puts its directory first on
# LD_LIBRARY_PATH (libcudnn.so.9 opens its sub-libraries, graph and engines,
# by name). It changes nothing when ENGINE_CUDNN_LIBRARY is set or
# libcudnn.so.9 is already found, says on stderr what it did, and never ends
# the shell that sources it (no exit, no set -e).

cudnn_env_main() {
  local name=libcudnn.so.9 dir py found=""
  if [ -n "${ENGINE_CUDNN_LIBRARY:-}" ]; then
    echo "cudnn_env: ENGINE_CUDNN_LIBRARY is already $ENGINE_CUDNN_LIBRARY" >&2
    return 0
  fi
  local -a dirs=()
  IFS=: read -r -a dirs <<<"${LD_LIBRARY_PATH:-}"
  for dir in "${dirs[@]}"; do
    if [ -n "$dir" ] && [ -e "$dir/$name" ]; then
      echo "cudnn_env: $dir/$name is on LD_LIBRARY_PATH; nothing to do" >&2
      return 0
    fi
  done
  # The cache is captured before it is searched: piped straight into grep -q,
  # a caller's pipefail fails the test when grep leaves early and ldconfig gets SIGPIPE.
  local cache
  cache=$(ldconfig -p 2>/dev/null) || cache=""
  if grep -q "^[[:space:]]*$name " <<<"$cache"; then
    echo "cudnn_env: the loader finds $name; nothing to do" >&2
    return 0
  fi
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    # nvidia.cudnn is a namespace package in the wheels: its path, not a __file__.
    dir=$("$py" -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null) || continue
    if [ -e "$dir/$name" ]; then
      found=$dir
      break
    fi
  done
  if [ -z "$found" ]; then
    echo "cudnn_env: no $name on the loader's path nor in a python3's nvidia-cudnn wheel;" \
      "install cuDNN 9 (or pip install nvidia-cudnn-cu13) or set ENGINE_CUDNN_LIBRARY" >&2
    return 0
  fi
  export ENGINE_CUDNN_LIBRARY=$found/$name
  export LD_LIBRARY_PATH=$found${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "cudnn_env: ENGINE_CUDNN_LIBRARY=$ENGINE_CUDNN_LIBRARY (the pip wheel's), $found first on LD_LIBRARY_PATH" >&2
}

cudnn_env_main
unset -f cudnn_env_main
