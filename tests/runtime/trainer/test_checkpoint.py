"""What a checkpoint carries besides its weights: the model folder's own files, read once at setup."""

from trinity.runtime.records.run_dir import STATE
from trinity.runtime.trainer.checkpoint import companion_files


def test_a_checkpoint_carries_the_models_files_but_not_its_weights_or_state(tmp_path):
    files = ["config.json", "tokenizer.json", "chat_template.jinja", "modeling_tiny.py", "tokenizer.model"]
    skipped = ["model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "optimizer.pt", ".lock", STATE]
    for name in files + skipped:
        (tmp_path / name).write_bytes(name.encode())
    (tmp_path / "trainer_state").mkdir()  # verl's optimizer state: a folder, never copied
    assert companion_files(tmp_path) == {name: name.encode() for name in sorted(files)}
