"""The chat template prompts go through: model.chat_template_path overrides model.custom_chat_template
(upstream's rule), the rollout engines take the model's, and a data set's format.chat_template overrides
both for its rows. Every template is parsed here, so a typo fails before Ray, not at the first prompt."""

from functools import lru_cache
from pathlib import Path

from ._context import Context
from ._rule import each_taskset, rule
from .buffer import EXPERIENCES, tasksets

CUSTOM, PATH = "model.custom_chat_template", "model.chat_template_path"


@rule(
    reads=(
        "buffer.trainer_input.experience_buffer.format.chat_template",
        "explorer.auxiliary_models.*.chat_template",
        "model.chat_template_path",
        "model.custom_chat_template",
        *each_taskset("format.chat_template"),
    ),
    writes=("model.custom_chat_template",),
    # the engine's own template as written; model.rollout_model (later) fills it from model.custom_chat_template
    before=("explorer.rollout_model.chat_template",),
)
def chat_template(ctx: Context) -> None:
    """Read model.chat_template_path into model.custom_chat_template; refuse a template that does not parse."""
    path = ctx.get(PATH)
    if path is not None and _read(ctx, Path(path)):
        if ctx.user_set(CUSTOM):
            ctx.report("warning", CUSTOM, "is overridden by model.chat_template_path", hint="set only one of them")
    for key in _inline_keys(ctx):
        problem = syntax_error(ctx.get(key))
        if problem:
            ctx.report(
                "error",
                key,
                f"chat template does not parse: {problem}",
                allowed="a Jinja2 template, as in a tokenizer's chat_template",
                hint="test it with tokenizer.apply_chat_template(messages, chat_template=...)",
            )


def _read(ctx: Context, path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        ctx.report(
            "error",
            PATH,
            f"cannot read the chat template {str(path)!r}: {exc.strerror if isinstance(exc, OSError) else exc}",
            allowed="a readable Jinja2 file",
            hint="paths are relative to the directory trinity runs in",
        )
        return False
    problem = syntax_error(text)
    if problem:
        ctx.report(
            "error",
            PATH,
            f"chat template {str(path)!r} does not parse: {problem}",
            allowed="a Jinja2 template, as in a tokenizer's chat_template",
        )
        return False
    ctx.set(CUSTOM, text, "chat_template", (ctx.input(PATH),))
    return True


def _inline_keys(ctx: Context) -> list[str]:
    """Template keys written in the config (a file's text was checked as it was read)."""
    keys = [] if ctx.get(PATH) is not None else [CUSTOM]
    keys += [
        "explorer.rollout_model.chat_template",
        *(f"explorer.auxiliary_models.{i}.chat_template" for i in range(len(ctx.get("explorer.auxiliary_models")))),
    ]
    keys += [f"{key}.format.chat_template" for key, _, _ in tasksets(ctx)]
    keys += [f"{EXPERIENCES}.format.chat_template"] if ctx.get(EXPERIENCES) else []
    return [key for key in keys if ctx.get(key) is not None]


def syntax_error(text: str) -> str | None:
    """`line N: message` when the Jinja2 template does not parse as transformers parses chat templates; else None."""
    from jinja2 import TemplateSyntaxError

    try:
        _environment().parse(text)
    except TemplateSyntaxError as exc:
        return f"line {exc.lineno}: {exc.message}"
    return None


@lru_cache(maxsize=1)
def _environment():
    """A sandboxed Jinja2 environment with the tags transformers adds: loop controls and `generation` blocks."""
    from jinja2 import nodes
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """`{% generation %}...{% endgeneration %}`, which transformers uses to mark assistant tokens: parsed for its
        body."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            return nodes.Scope(parser.parse_statements(("name:endgeneration",), drop_needle=True), lineno=lineno)

    return ImmutableSandboxedEnvironment(extensions=["jinja2.ext.loopcontrols", Generation])
