"""Weights on disk: safetensors in the Hugging Face layout, LoRA adapters and merged models."""
