"""Names that point to a hub: models and data sets named by hub id (`Qwen/Qwen2.5-1.5B-Instruct`, `openai/gsm8k`).

The path is one-way (docs/config.md, "Models and data sets by hub name"):
- `names`: which keys may name a hub repo, and what a value names (a local path wins);
- `cache`: huggingface_hub's own cache on this machine, read without importing it (`HF_HOME`, `HF_HUB_CACHE`);
- `card`: a data set repo's subsets and splits, from its card's `configs:` and its files, as `datasets` reads them;
- `remote`: the bounded look-up of a name on the hub (`HF_ENDPOINT`, `HF_TOKEN`), importing huggingface_hub;
- `issues`: what `trinity config validate` says of each name; `local`: the config with each fetched name's folder.
The download itself is the driver's (`trinity.launch.fetch`), once, before Ray: roles only ever see local folders.
"""
