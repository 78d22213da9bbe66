"""`model:` section: the policy model and its token budget."""

from typing import Optional

from pydantic import Field, PositiveInt

from ._base import Section


class ModelConfig(Section):
    model_path: str = Field(..., min_length=1, description="Local path or hub name of the policy model.")
    critic_model_path: Optional[str] = Field(None, description="Critic model; defaults to model_path.")
    max_model_len: Optional[PositiveInt] = Field(None, description="Context length of prompt plus response.")
    max_prompt_tokens: Optional[PositiveInt] = Field(None, description="Longest prompt; derived as max_model_len - max_response_tokens.")
    max_response_tokens: Optional[PositiveInt] = Field(None, description="Longest generated response.")
    min_response_tokens: int = Field(1, ge=0, description="Shortest generated response.")
    custom_chat_template: Optional[str] = Field(None, description="Jinja chat template replacing the tokenizer's.")
