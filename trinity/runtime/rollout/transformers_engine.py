"""`engine_type: transformers`: Hugging Face `generate` on any torch device, log-probs included.

Requests that arrive while a batch is generating are generated together in the next batch;
requests with the same sampling arguments share one `generate` call. The rows of a prompt sampled n times (a GRPO
group) share its prefill: its cache is computed once and copied to each row.
"""

import asyncio
from typing import Any

from ..weights import lora, model_config
from .base import WEIGHTS, RolloutEngine
from .samples import Sample, Sampling

MAX_SEQUENCES = 512  # per generate call: bounds activation memory on large batches
# Model types whose `generate` builds a plain DynamicCache from the model's config and continues one computed by a
# forward pass of the same model exactly (checked in tests/runtime/rollout/test_transformers_engine.py); another
# model type prefills every row itself.
SHARED_PREFILL_TYPES = ("llama", "mistral", "qwen2", "qwen3")


class TransformersEngine(RolloutEngine):
    """A Hugging Face causal LM behind the engine interface."""

    WARM = ("torch", "transformers")

    def _load(self, model_path: str) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        rollout = self.config.explorer.rollout_model
        torch.manual_seed(rollout.seed + self.index)
        remote = self.config.model.trust_remote_code
        start = lora.sources(model_path, self.config)
        self.tokenizer = AutoTokenizer.from_pretrained(start.base, trust_remote_code=remote)
        dtype = getattr(torch, rollout.dtype)
        config = self._model_config(start.base, remote)
        model = AutoModelForCausalLM.from_pretrained(start.base, dtype=dtype, trust_remote_code=remote, config=config)
        self.model = self._adapted(model, start.adapter).to(self._device()).eval()
        self.pad_id = (
            self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        )
        # the token that ends a reply; None with ignore_eos: every reply runs to its max_tokens (vLLM's ignore_eos)
        self.eos_id = None if rollout.ignore_eos else self.tokenizer.eos_token_id
        self.asleep = False

    def _tokenizer(self, model_path: str) -> Any:
        return self.tokenizer

    def _model_config(self, base: str, remote: bool) -> Any:
        """The model's config with what the run changes in it (model.rope_*), as the trainer's (model_config.py)."""
        from transformers import AutoConfig

        return model_config.apply(
            AutoConfig.from_pretrained(base, trust_remote_code=remote), model_config.overrides(self.config, base)
        )

    async def sleep(self, level: int = 1) -> bool:
        """Move the model to host memory, so the trainer sharing this device (colocate) has its memory."""
        async with self._weights_lock:
            await asyncio.to_thread(self._move, "cpu")
            self.asleep = True
        return True

    async def wake_up(self, tags: list[str] | None = None) -> bool:
        """Move the model back onto the device (its weights: it keeps no KV cache between requests)."""
        if tags is not None and WEIGHTS not in tags:
            return self.asleep
        async with self._weights_lock:
            await asyncio.to_thread(self._move, self._device())
            self.asleep = False
        return False

    def _move(self, device: str) -> None:
        from ...utils.device import empty_cache

        self.model.to(device)
        empty_cache()  # hand the freed blocks back to the device, not just to torch's cache

    def _adapted(self, model: Any, adapter: str | None) -> Any:
        """With LoRA applied by the engines: the model under a peft adapter (the checkpoint's, or a fresh one, zero in
        B like the trainer's, until the first sync), in lora_dtype (auto: the model's)."""
        if not lora.moves_adapter(self.config):
            return model  # merged weights: the stage hands this engine a plain model (lora.engine_start)
        import torch
        from peft import LoraConfig, PeftModel, get_peft_model

        settings = lora.adapter_of(self.config)
        if adapter:
            model = PeftModel.from_pretrained(model, adapter)
        else:
            model = get_peft_model(model, LoraConfig(**lora.peft_config(settings, model.name_or_path)))
        wanted = self.config.explorer.rollout_model.dtype if settings.lora_dtype == "auto" else settings.lora_dtype
        dtype = getattr(torch, wanted)
        for name, param in model.named_parameters():
            if lora.is_adapter_key(name):
                param.data = param.data.to(dtype)
        return model

    def _params(self) -> dict[str, Any]:
        params = self.model.state_dict(keep_vars=True)  # tied weights appear under both names, as the trainer sends
        if not lora.moves_adapter(self.config):
            return params
        return {lora.saved_name(k): v for k, v in params.items() if lora.is_adapter_key(k)}  # the adapter's only

    def _generate(self, requests: list[tuple[list[int], int, Sampling]]) -> list[list[Sample]]:
        if self.asleep:  # its model is in host memory: the stage hands the devices back first
            raise RuntimeError(
                f"{self.name} was asked to generate while asleep (colocate: the trainer holds the devices)"
            )
        by_sampling: dict[tuple, list[int]] = {}
        for i, (prompt, _, sampling) in enumerate(requests):
            # generate's repetition penalty also counts the left padding: penalised prompts share a batch only with
            # their own length
            width = len(prompt) if sampling.repetition_penalty != 1.0 else 0
            by_sampling.setdefault((sampling, width), []).append(i)
        results: list[list[Sample]] = [[] for _ in requests]
        for (sampling, _), indices in by_sampling.items():
            rows = [(i, requests[i][0]) for i in indices for _ in range(requests[i][1])]
            for start in range(0, len(rows), MAX_SEQUENCES):
                chunk = rows[start : start + MAX_SEQUENCES]
                for (i, _), sample in zip(chunk, self._sample([ids for _, ids in chunk], sampling)):
                    results[i].append(sample)
        return results

    def _sample(self, prompts: list[list[int]], sampling: Sampling) -> list[Sample]:
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.tensor([[self.pad_id] * (width - len(p)) + p for p in prompts], device=self._device())
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self._device())
        greedy = sampling.temperature == 0
        with torch.no_grad():
            cache = self._prefilled(prompts, ids, mask)
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                **({"past_key_values": cache} if cache is not None else {}),
                do_sample=not greedy,
                temperature=None if greedy else sampling.temperature,
                top_p=None if greedy else sampling.top_p,
                top_k=None
                if greedy
                # 0 is no top-k, plainly; what None means has varied across transformers versions
                else max(sampling.top_k, 0),
                max_new_tokens=sampling.max_tokens,
                min_new_tokens=sampling.min_tokens or None,
                repetition_penalty=None if sampling.repetition_penalty == 1.0 else sampling.repetition_penalty,
                pad_token_id=self.pad_id,
                eos_token_id=self.eos_id,
                return_dict_in_generate=True,
                output_scores=True,
            )
        tokens = out.sequences[:, width:]
        # scores are what each token was drawn from: after the penalty, min_new_tokens, temperature, top-k and top-p
        # (vLLM's processed_logprobs)
        picked, best = (
            [],
            [],
        )  # per step: the sampled tokens' log-probs, the k likeliest (one step's log-softmax at once)
        for t, step in enumerate(out.scores):
            logsoftmax = torch.log_softmax(step.float(), dim=-1)
            picked.append(logsoftmax.gather(1, tokens[:, t : t + 1]).squeeze(1))
            if sampling.logprobs > 0:
                best.append(logsoftmax.topk(min(sampling.logprobs, logsoftmax.shape[-1]), dim=-1))
        logprobs = torch.stack(picked, dim=1)
        rows = [self._trim(row, lp) for row, lp in zip(tokens.tolist(), logprobs.tolist())]
        texts = self.tokenizer.batch_decode([r for r, _ in rows], skip_special_tokens=True)
        tops = _top_logprobs(best, [len(r) for r, _ in rows])
        return [Sample(r, lp, text, r[-1:] == [self.eos_id], top) for (r, lp), text, top in zip(rows, texts, tops)]

    def _prefilled(self, prompts: list[list[int]], ids: Any, mask: Any) -> Any:
        """The cache of each row's prompt but its last token, computed once per distinct prompt and copied to its rows;
        None where no two rows share a prompt, or the model is not of SHARED_PREFILL_TYPES, or its generation config
        names a cache of another kind."""
        import torch
        from transformers import DynamicCache

        first: dict[tuple, int] = {}  # each distinct prompt's first row, in order
        for i, p in enumerate(prompts):
            first.setdefault(tuple(p), i)
        model = self.model
        if (
            len(first) == len(prompts)
            or ids.shape[1] < 2
            or getattr(model.config, "model_type", None) not in SHARED_PREFILL_TYPES
            or getattr(model.generation_config, "cache_implementation", None) is not None
        ):
            return None
        which = {key: k for k, key in enumerate(first)}
        rows = torch.tensor([which[tuple(p)] for p in prompts], device=ids.device)  # each row's distinct prompt
        keep = torch.tensor(list(first.values()), device=ids.device)
        prompt_ids, masks = ids[keep, :-1], mask[keep, :-1]
        positions = (masks.cumsum(-1) - 1).masked_fill(masks == 0, 0)  # as generate numbers left-padded rows
        cache = DynamicCache(config=model.config.get_text_config(decoder=True))
        # only the cache is wanted: logits of the last position alone, as generate's own prefill asks
        model(
            input_ids=prompt_ids, attention_mask=masks, position_ids=positions, past_key_values=cache, logits_to_keep=1
        )
        cache.reorder_cache(rows)
        return cache

    def _trim(self, tokens: list[int], logprobs: list[float]) -> tuple[list[int], list[float]]:
        """Cut after the end-of-sequence token (kept: the model learns to stop) and drop padding."""
        end = tokens.index(self.eos_id) + 1 if self.eos_id in tokens else len(tokens)
        return tokens[:end], logprobs[:end]


def _top_logprobs(best: list[Any], lengths: list[int]) -> list[list[dict[int, float]] | None]:
    """Each row's k most likely tokens and their log-probs at each of its `lengths` positions, most likely first, from
    `best` (one torch.topk result of [rows, vocabulary] per position); None for every row where none was asked."""
    if not best:
        return [None] * len(lengths)
    import torch

    values, ids = torch.stack([b.values for b in best], dim=1), torch.stack([b.indices for b in best], dim=1)
    return [
        [dict(zip(i, v)) for i, v in zip(ids[row, :length].tolist(), values[row, :length].tolist())]
        for row, length in enumerate(lengths)
    ]
