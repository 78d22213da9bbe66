"""Real conversations for environment workflows' tests: a character tokenizer of printable text and a rollout-engine
stand-in that replies from scripts (one per episode, in the order episodes open). The conversations, their chat
template and their tokens are real; only the replies are fixed, as these tests are about the environments."""

from string import printable

from trinity.runtime.workflows.conversation import ChatTemplate, Conversation

# each message as "role: content", the model's turns closed by <eos>
TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{% if m['role'] == 'assistant' %}<eos>{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)


def char_tokenizer(extra: str = ""):
    """One token per character of printable ASCII and `extra`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel(unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    raw.decoder = decoders.Fuse()
    raw.train_from_iterator([printable + extra], trainers.WordLevelTrainer(special_tokens=["<pad>", "<eos>", "<unk>"]))
    return PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


class Scripted:
    """Stands in for the rollout engines with scripted replies, one script per episode in the order they open."""

    def __init__(self, tokenizer, scripts):
        self.tokenizer, self.scripts, self.opened = tokenizer, scripts, {}

    def conversation(self, task, messages=None, tools=None):
        talk = Conversation(ChatTemplate(self.tokenizer, TEMPLATE), messages, 8192)
        self.opened[id(talk)] = list(self.scripts[len(self.opened)])
        return talk

    def reply(self, conversations):
        for talk in conversations:
            text = self.opened[id(talk)].pop(0)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            talk.add_reply(ids, [-0.5] * len(ids), text, 1)
