"""The frozen lake `frozen_lake_workflow` plays: gymnasium's FrozenLakeEnv on a lake generated from a row's size, p and
seed (or given), rendered as text, moved by the words the model answers with.

As Trinity-RFT's frozen lake (trinity/common/workflows/envs/frozen_lake/utils.py and workflow.py, after rLLM's): a lake
is drawn from gymnasium's seeded generator, frozen with probability p, start and goal at distinct random cells, until
a depth-first search finds a path within `max_steps` moves (the same draws, so a seed gives upstream's lake); the text
shows each cell as ` P `, ` _ `, ` O `, ` G ` (player, frozen, hole, goal; ` X ` the player in a hole, ` √ ` on the
goal), each followed by a tab, one row per line. gymnasium is imported when a lake is made, never before.
"""

import re
from dataclasses import dataclass
from typing import Any

ACTIONS = {"left": 1, "down": 2, "right": 3, "up": 4}  # the model's words and numbers; 0 is no move
GYM_ACTION = {1: 0, 2: 1, 3: 2, 4: 3}  # ours -> gymnasium's LEFT, DOWN, RIGHT, UP
CELL = {"P": " P \t", "F": " _ \t", "H": " O \t", "G": " G \t", "hole": " X \t", "goal": " √ \t"}
MAX_DRAWS = 10_000  # lakes drawn before a row's size, p and max_steps are called impossible


def gymnasium() -> Any:
    """gymnasium, or an error saying how to install it."""
    try:
        import gymnasium
        import gymnasium.envs.toy_text.frozen_lake
    except ImportError as exc:
        raise ImportError(
            f"frozen_lake_workflow needs gymnasium ({exc}): pip install 'trinity[gym]' where the explorer runs"
        ) from None
    return gymnasium


def generate(size: int, p: float, seed: int, max_steps: int) -> list[str]:
    """A lake of `size` x `size` cells with a path from S to G of at most `max_steps` moves, from gymnasium's
    generator seeded with `seed`."""
    seeding = gymnasium().utils.seeding

    if size < 2:
        raise ValueError(f"a frozen lake's size is at least 2 (start and goal are distinct cells); the row says {size}")
    rng, _ = seeding.np_random(seed)
    p = min(1.0, p)
    for _ in range(MAX_DRAWS):
        board = rng.choice(["F", "H"], (size, size), p=[p, 1 - p]).tolist()
        while True:
            start = (int(rng.integers(0, size)), int(rng.integers(0, size)))
            goal = (int(rng.integers(0, size)), int(rng.integers(0, size)))
            if start != goal:
                break
        board[start[0]][start[1]], board[goal[0]][goal[1]] = "S", "G"
        if reachable(board, start, max_steps):
            return ["".join(row) for row in board]
    raise ValueError(f"no lake of size {size}, p {p} has a path within {max_steps} moves in {MAX_DRAWS} draws")


def reachable(board: list[list[str]], start: tuple[int, int], max_steps: int) -> bool:
    """Upstream's depth-first search: the goal is next to a cell reached in at most `max_steps` moves, around holes
    (each cell visited once, in the order the search first reaches it)."""
    size, frontier, seen = len(board), [(*start, 0)], set()
    while frontier:
        r, c, steps = frontier.pop()
        if steps > max_steps or (r, c) in seen:
            continue
        seen.add((r, c))
        for dr, dc in ((1, 0), (0, 1), (-1, 0), (0, -1)):
            nr, nc = r + dr, c + dc
            if not (0 <= nr < size and 0 <= nc < size):
                continue
            if board[nr][nc] == "G":
                return True
            if board[nr][nc] != "H":
                frontier.append((nr, nc, steps + 1))
    return False


def parse_action(reply: str) -> int:
    """The action in the reply's last ``` block: Left, Down, Right or Up (any case), or 1 to 4; 0 when none."""
    blocks = re.findall(r"```(.*?)```", reply, re.DOTALL)
    if not blocks:
        return 0
    said = blocks[-1].strip().lower()
    if said in ACTIONS:
        return ACTIONS[said]
    return int(said) if said.isdigit() and int(said) in GYM_ACTION else 0


@dataclass
class Lake:
    """One episode's lake in gymnasium: where the player is, and whether it has ended."""

    env: Any
    rows: list[str]

    @classmethod
    def make(cls, rows: list[str], slippery: bool, seed: int) -> "Lake":
        env = gymnasium().envs.toy_text.frozen_lake.FrozenLakeEnv(desc=rows, is_slippery=slippery)
        env.reset(seed=seed)
        return cls(env, rows)

    def cell(self) -> str:
        row, col = divmod(int(self.env.s), len(self.rows[0]))
        return self.rows[row][col]

    def step(self, action: int) -> tuple[float, bool]:
        """(reward, done) of one action; an invalid one (0) leaves the player where it is."""
        if action not in GYM_ACTION:
            return 0.0, False
        _, reward, terminated, _, _ = self.env.step(GYM_ACTION[action])
        return float(reward), bool(terminated)

    def render(self) -> str:
        """The lake as the model reads it."""
        row, col = divmod(int(self.env.s), len(self.rows[0]))
        lines = []
        for r, cells in enumerate(self.rows):
            shown = []
            for c, cell in enumerate(cells):
                here = (r, c) == (row, col)
                key = {"H": "hole", "G": "goal"}.get(cell, "P") if here else ("F" if cell == "S" else cell)
                shown.append(CELL[key])
            lines.append("".join(shown))
        return "\n".join(lines)
