"""Where a pin lies relative to the manifest base (ahead, behind, diverged) is one `rev-list` over both
sides, and says what asking ancestry each way and then counting says; a commit git cannot walk is
asked the old way."""

from __future__ import annotations

from pathlib import Path

from forkctl.chain.forkhead import _relation, _relation_asked_apart
from forkctl.git.repo import GitRepo
from tests.gitrepos import init_repo


def test_ahead_behind_and_diverged_read_as_when_asked_apart(tmp_path: Path) -> None:
    work = init_repo(tmp_path / "r", {"a.txt": "a\n"})
    root = work.head()
    base = work.commit("base", {"a.txt": "b\n"})
    ahead = [work.commit(f"ahead {n}", {"a.txt": f"c{n}\n"}) for n in range(3)]
    work.git("checkout", "-q", "-b", "side", root)
    side = work.commit("side", {"s.txt": "s\n"})
    repo = GitRepo(work.path)
    cases = {ahead[-1]: "3 commits ahead", root: "1 commits behind", side: "diverged from"}
    for commit, said in cases.items():
        assert repo.history.ahead_behind(base, commit) is not None
        assert _relation(repo.history, commit, base) == _relation_asked_apart(repo.history, commit, base)
        assert _relation(repo.history, commit, base).startswith(said), (
            commit,
            _relation(repo.history, commit, base),
        )
    assert repo.history.ahead_behind(base, "0" * 40) is None  # not here: the old questions answer
    assert _relation(repo.history, "0" * 40, base) == _relation_asked_apart(repo.history, "0" * 40, base)
