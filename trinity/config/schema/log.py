"""`log:` section: the roles' log files (Trinity-RFT's LogConfig)."""

from typing import Literal

from pydantic import Field

from ._base import Section

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class LogConfig(Section):
    level: Literal[LEVELS] = Field("INFO", description="Lowest level a role writes to its log file.")
    group_by_node: bool = Field(
        False, description="Write each role's log under <log dir>/<node IP>/, the IP of the node it runs on."
    )
    save_dir: str = Field(
        "", description="Folder of the roles' logs; '' is <run dir>/logs (Trinity-RFT always fills it itself)."
    )
