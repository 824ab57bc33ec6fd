#!/usr/bin/env bash
# The GPU bundle's one command (copied to .gpu-bundle/run.sh by
# `cargo xtask gpu-bundle`). For a GPU machine with the NVIDIA driver, nvcc,
# CMake, PyTorch and sentence-transformers, and no Rust or network:
#
#   OUT=/path/to/results bash run.sh
#
# 1. preflight: driver, GPU, CUDA libraries (NVRTC, cuBLAS: 12 or 13; links
#    unversioned names for CUDA 13 so cudarc finds them); fails here, clearly,
#    when there is no driver or GPU;
# 2. builds cuSZp (bundled source) with CMake for this GPU;
# 3. GPU tests (LAM_REQUIRE_GPU=1: a missing device is a failure);
# 4. verify-digests on the 6-trajectory sample: CUDA fp32 must reproduce the
#    CPU golden digests computed from the same fp16-rounded weights; bf16 is
#    compared with the CPU and reported (agreement, digest, flipped decisions);
#    codec streams CPU = GPU;
# 5. benchmarks beside PyTorch and cuSZp (xtask gpu-bench);
# then a table. Everything goes to $OUT/gpu-run.log too. Budget: 8 minutes.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$here/out}"
mkdir -p "$OUT"
log="$OUT/gpu-run.log"
: >"$log"
work="${TMPDIR:-/tmp}/lam-gpu-bundle.$$"
mkdir -p "$work/bin" "$work/lib"
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
declare -a names=() states=() secs=()

say() { echo "$*" | tee -a "$log"; }
step() { # step NAME TIMEOUT_S CMD...: run, log, record ok/FAIL
  local name="$1" limit="$2"
  shift 2
  local s
  s=$(date +%s)
  say ""
  say "===== $name: $*"
  timeout "$limit" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  names+=("$name")
  secs+=($(($(date +%s) - s)))
  if [ "$rc" = 0 ]; then states+=("ok"); elif [ "$rc" = 124 ]; then states+=("FAIL (timeout ${limit}s)"); else states+=("FAIL (exit $rc)"); fi
  return 0
}

# ---- 1. preflight
say "lam GPU bundle: $here"
say "preflight"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >>"$log" 2>&1; then
  say "FAIL preflight: no NVIDIA driver or GPU here (nvidia-smi missing or failing); nothing to run."
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv | tee -a "$log"
cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '. ')"
# Library directories: the toolkit's, then PyTorch's pip wheels (nvidia/*/lib).
dirs=()
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  [ -d "$d" ] && dirs+=("$d")
done
py="${PYTHON:-python3}"
if pyd="$("$py" -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)"; then
  for d in "$pyd"/nvidia/*/lib; do [ -d "$d" ] && dirs+=("$d"); done
fi
# cudarc (CUDA 12.8 bindings) looks for libX.so, libX.so.12, ...: link the
# newest libX.so.N found as $work/lib/libX.so so CUDA 13 is found too.
for lib in nvrtc cublas cublasLt; do
  found=""
  for d in "${dirs[@]}"; do
    for f in "$d/lib$lib".so.13* "$d/lib$lib".so.12*; do
      [ -e "$f" ] && { found="$f"; break 2; }
    done
  done
  if [ -n "$found" ]; then
    ln -sf "$found" "$work/lib/lib$lib.so"
    say "  lib$lib: $found"
  else
    say "  lib$lib: NOT FOUND in ${dirs[*]:-(no CUDA library directory)}"
  fi
done
if [ ! -e "$work/lib/libnvrtc.so" ] || [ ! -e "$work/lib/libcublas.so" ]; then
  say "FAIL preflight: NVRTC and cuBLAS of CUDA 12 or 13 are needed (toolkit or PyTorch's nvidia-* wheels)."
  exit 2
fi
joined="$(IFS=:; echo "${dirs[*]}")"
export LD_LIBRARY_PATH="$work/lib:$joined${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset NVIDIA_TF32_OVERRIDE
for b in "$here"/bin/*.gz; do gunzip -c "$b" >"$work/bin/$(basename "$b" .gz)" && chmod +x "$work/bin/$(basename "$b" .gz)"; done
model="$work/model/all-MiniLM-L6-v2"
mkdir -p "$work/model"
cp -r "$here/model/all-MiniLM-L6-v2" "$work/model/"
gunzip -f "$model/model.safetensors.gz"
say "  host: $(nproc) cores; nvcc: $(command -v nvcc || echo none); cmake: $(command -v cmake || echo none); python: $("$py" -c 'import torch, sentence_transformers as s; print("torch", torch.__version__, "cuda", torch.version.cuda, "sentence-transformers", s.__version__)' 2>&1 | tail -1)"

# ---- 2. cuSZp
cusz="$work/cuSZp-build"
# cuSZp's CMakeLists sets its own architecture list (60..86), which shadows
# -DCMAKE_CUDA_ARCHITECTURES: build a copy for this GPU only.
cp -r "$here/cuSZp" "$work/cuSZp"
sed -i "s/^set(CMAKE_CUDA_ARCHITECTURES .*)/set(CMAKE_CUDA_ARCHITECTURES $cap)/" "$work/cuSZp/CMakeLists.txt"
step "build cuSZp (sm_$cap)" 120 bash -c "cmake -S '$work/cuSZp' -B '$cusz' -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=$cap -DcuSZp_BUILD_EXAMPLES=OFF >/dev/null && cmake --build '$cusz' -j $(nproc) --target cuSZp_shared"
export CUSZP_DIR="$cusz"

# ---- 3. GPU tests
export LAM_REQUIRE_GPU=1 LAM_REQUIRE_NVRTC=1 LAM_MODEL="$model" LAM_FIXTURES="$here/fixtures"
[ -e "$cusz/libcuSZp.so" ] && export LAM_REQUIRE_CUSZP=1
step "tests lam-codec (cuda, cuszp)" 45 "$work/bin/test-lam-codec-kernels" --nocapture --test-threads 1
step "tests lam-encode (cuda)" 60 "$work/bin/test-lam-encode-cuda" --nocapture --test-threads 1

# ---- 4. digests across CPU and GPU
corpus="$here/corpus/mini-swe-agent-gemini3pro-swebench-verified/trajs"
dig=(verify-digests --corpus "$corpus" --sample 6 --model "$model" --golden "$here/golden" --compare-cpu)
step "verify-digests cuda fp32 (= CPU golden)" 75 "$work/bin/xtask" "${dig[@]}" --encoder cuda --batches "8,32,128"
step "verify-digests cuda bf16 (reported)" 45 "$work/bin/xtask" "${dig[@]}" --encoder cuda-bf16 --batches 32

# ---- 5. benchmarks
step "gpu-bench (encoder vs PyTorch, codec vs cuSZp)" 135 "$work/bin/xtask" gpu-bench --bundle "$here" --out "$OUT" --python "$py"

say ""
say "| step | seconds | status |"
say "| --- | --- | --- |"
fail=0
for i in "${!names[@]}"; do
  say "| ${names[$i]} | ${secs[$i]} | ${states[$i]} |"
  case "${states[$i]}" in FAIL*) fail=1 ;; esac
done
grep -E '^\| (encoder|codec) |^compare |^note: ' "$log" >"$OUT/gpu-summary.txt" || true
say ""
say "summary (also in $OUT/gpu-summary.txt):"
tee -a "$log" <"$OUT/gpu-summary.txt"
say "total $(($(date +%s) - t0)) s; full log $log"
exit $fail
