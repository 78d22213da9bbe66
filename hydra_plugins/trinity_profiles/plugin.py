"""Hydra sees every trinity profile folder as a config source with one `hardware/<profile>` option per profile.

Hydra imports every module under `hydra_plugins` whenever any Hydra app starts, so this one imports
only Hydra, OmegaConf and `trinity.paths`; a profile is resolved only when its option is loaded.
"""

from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin

from trinity import paths

from . import resolvers

SCHEME = "trinity"
GROUP = "hardware"
# One mapping for every profile (data): verl's keys, valued by the resolvers.
TEMPLATE = Path(__file__).with_name("verl.yaml")

resolvers.register()


class TrinityProfilesSearchPathPlugin(SearchPathPlugin):
    """Appends the profile folders ($TRINITY_PROFILE_PATH first, the shipped one last) to every app's search path."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        # Appended: the app's own configs, a `hardware/` group of its own included, come first and win.
        for folder in paths.profile_dirs():
            search_path.append(provider="trinity", path=f"{SCHEME}://{folder.resolve()}")


class TrinityProfileSource(ConfigSource):
    """One profile folder as a config group: `hardware/<name>` is the mapping resolved for that profile."""

    @staticmethod
    def scheme() -> str:
        return SCHEME

    def available(self) -> bool:
        return Path(self.path).is_dir()

    def is_group(self, config_path: str) -> bool:
        return self.available() and config_path.strip("/") in ("", GROUP)

    def is_config(self, config_path: str) -> bool:
        return self._profile(config_path) is not None

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        where = config_path.strip("/")
        if where == "" and results_filter in (None, ObjectType.GROUP) and self.available():
            return [GROUP]
        if where == GROUP and results_filter in (None, ObjectType.CONFIG):
            return sorted(paths.profile_files(Path(self.path)))
        return []

    def load_config(self, config_path: str) -> ConfigResult:
        name = self._profile(config_path)
        if name is None:
            raise ConfigLoadError(f"Config not found: {config_path}")
        text = TEMPLATE.read_text(encoding="utf-8")
        return ConfigResult(
            provider=self.provider,
            path=f"{self.full_path()}/{GROUP}/{name}.yaml",
            config=resolvers.mapping(text, name),
            header=self._get_header_dict(text),
        )

    def _profile(self, config_path: str) -> str | None:
        group, _, name = config_path.strip("/").removesuffix(".yaml").partition("/")
        return name if group == GROUP and name in paths.profile_files(Path(self.path)) else None
