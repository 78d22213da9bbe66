"""A real PEFT adapter on the demo model, for tests of what trinity does with adapters: peft itself builds it, its
matrices are random (B too, so it changes the model's outputs), and peft's own forward pass is the reference."""

import torch

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def peft_model(model_folder: str, rank: int = 8, alpha: int = 16, seed: int = 0, targets=TARGETS):
    """The model at `model_folder` (fp32) under a LoRA adapter with random A and B, ready for forward passes."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_folder, dtype=torch.float32)
    wrapped = get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, target_modules=list(targets)))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in wrapped.named_parameters():
            if "lora_" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    return wrapped.eval()


def adapter_tensors(wrapped) -> dict:
    """name -> tensor of the adapter as PEFT saves it (and as trinity's trainer sends it)."""
    from peft import get_peft_model_state_dict

    return {name: tensor.detach().clone() for name, tensor in get_peft_model_state_dict(wrapped).items()}


def logprobs(model, ids: list[int], response: list[int]) -> torch.Tensor:
    """Log-probs of every vocabulary entry at each response position, teacher-forced on `response`."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids + response])).logits[0, len(ids) - 1 : -1]
    return torch.log_softmax(logits.float(), -1)
