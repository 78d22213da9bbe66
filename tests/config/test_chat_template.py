"""Chat templates: a file's text becomes the model's template, the engines take it, and a template that
does not parse fails `trinity config validate` at the key that holds it."""

import pytest

from tests.conftest import MINIMAL

TEMPLATE = (
    "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt "
    "%}[assistant] {% endif %}"
)
BROKEN = "{% for m in messages %}\n{{ m.content }}\n"  # the loop is never closed


@pytest.fixture
def render(cli, write):
    def _render(text: str, *args: str):
        result = cli(
            "config", "render", "-c", write("run.yaml", MINIMAL + text), "--format", "json", "hardware=a100", *args
        )
        return result, (result.json() if result.code == 0 else None)

    return _render


def test_a_template_file_becomes_the_models_template_and_the_engines(render, write):
    write("chat.jinja", TEMPLATE)
    result, cfg = render("  chat_template_path: chat.jinja\n")
    assert result.code == 0 and result.err == ""
    assert (
        cfg["model"]["custom_chat_template"] == TEMPLATE
        and cfg["explorer"]["rollout_model"]["chat_template"] == TEMPLATE
    )


def test_an_inline_template_reaches_the_engines_and_a_file_overrides_it_with_a_warning(render, write):
    block = "".join(f"    {line}\n" for line in TEMPLATE.splitlines())
    _, inline = render(f"  custom_chat_template: |-\n{block}")
    assert inline["explorer"]["rollout_model"]["chat_template"] == TEMPLATE
    write("chat.jinja", "{{ messages[-1].content }}")
    result, both = render("  custom_chat_template: '{{ messages }}'\n  chat_template_path: chat.jinja\n")
    assert result.code == 0 and both["explorer"]["rollout_model"]["chat_template"] == "{{ messages[-1].content }}"
    assert "warning: run.yaml:3:3: model.custom_chat_template: is overridden by model.chat_template_path" in result.err


def test_a_missing_template_file_is_an_error_at_its_key(cli, write):
    result = cli(
        "config",
        "validate",
        "-c",
        write("run.yaml", MINIMAL + "  chat_template_path: nowhere.jinja\n"),
        "hardware=a100",
    )
    assert result.code == 2
    assert (
        "error: run.yaml:3:3: model.chat_template_path: cannot read the chat template 'nowhere.jinja': No such file "
        "or directory" in result.err
    )


def test_a_template_file_that_does_not_parse_names_its_line(cli, write):
    write("chat.jinja", BROKEN)
    result = cli(
        "config", "validate", "-c", write("run.yaml", MINIMAL + "  chat_template_path: chat.jinja\n"), "hardware=a100"
    )
    assert (
        result.code == 2
        and "error: run.yaml:3:3: model.chat_template_path: chat template 'chat.jinja' does not parse: line 2: "
        "Unexpected end of template"
        in result.err
    )


@pytest.mark.parametrize(
    "text,where",
    [
        ("  custom_chat_template: '{% if x %}'\n", "run.yaml:3:3: model.custom_chat_template"),
        (
            "explorer:\n  rollout_model:\n    chat_template: '{{ x '\n",
            "run.yaml:5:5: explorer.rollout_model.chat_template",
        ),
        (
            "buffer:\n  explorer_input:\n    taskset:\n      path: /d\n      format: {chat_template: '{% endfor %}'}\n",
            "run.yaml:7:16: buffer.explorer_input.taskset.format.chat_template",
        ),
    ],
)
def test_an_inline_template_that_does_not_parse_is_an_error_where_it_is_written(cli, write, text, where):
    result = cli("config", "validate", "-c", write("run.yaml", MINIMAL + text), "hardware=a100")
    assert result.code == 2 and f"error: {where}: chat template does not parse: line 1:" in result.err, result.err


def test_transformers_generation_tags_and_loop_controls_parse(render):
    text = (
        "{% for m in messages %}{% if loop.index > 9 %}{% break %}{% endif %}{% generation %}{{ m.content }}{% "
        "endgeneration %}{% endfor %}"
    )
    result, cfg = render(f"  custom_chat_template: '{text}'\n")
    assert result.code == 0 and cfg["model"]["custom_chat_template"] == text
    # checked past the tag
    broken, _ = render("  custom_chat_template: '{% generation %}{{ x }}{% endgeneration %}{{ y '\n")
    assert broken.code == 2 and "chat template does not parse: line 1: unexpected end of template" in broken.err
