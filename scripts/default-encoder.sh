#!/usr/bin/env bash
# The encoder the integration tests run with: `bert` (the default,
# all-MiniLM-L6-v2) when its weights are installed under $LAM_HOME
# (scripts/install.sh), else the model-free `hashing` encoder.
LAM_HOME="${LAM_HOME:-$HOME/.cache/lam}"
if [ -f "$LAM_HOME/models/all-MiniLM-L6-v2/model.safetensors" ]; then echo bert; else echo hashing; fi
