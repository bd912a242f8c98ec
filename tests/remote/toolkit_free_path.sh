# Sourced by .ci/run and tests/remote/run.sh: prints a PATH from which no
# CUDA toolkit is reachable (no directory that holds nvcc or has "cuda" in its
# name), with deno reached through a directory of its own, `$1`. Fails when
# nvcc is still found on it.
toolkit_free_path() {
  local bin=$1 path dir
  mkdir -p "$bin"
  ln -sf "$(command -v deno)" "$bin/deno"
  path=$bin
  IFS=: read -ra dirs <<<"$PATH"
  for dir in "${dirs[@]}"; do
    [[ -z "$dir" || "$dir" == *cuda* || -e "$dir/nvcc" ]] || path+=":$dir"
  done
  if PATH="$path" command -v nvcc >/dev/null; then
    echo "nvcc is still reachable from $path" >&2
    return 1
  fi
  echo "$path"
}
