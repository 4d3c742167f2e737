"""A fresh folder per attempt: empty, a copy of a template folder, or a git worktree of a repository.

Each attempt gets ``<root>/agl-<rollout>-<attempt>-<random>/`` holding ``work/`` (the program's working
folder) and ``io/`` (the files agl writes for it and reads back: input, resources, reward), so nothing agl
writes shows up in a repository's ``git status``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AttemptFolder", "WorkFolderError", "make_attempt_folder", "remove_attempt_folder"]

logger = logging.getLogger(__name__)

_GIT_TIMEOUT_SECONDS = 120.0
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class WorkFolderError(RuntimeError):
    """The attempt's working folder could not be made (a missing template, a failing ``git worktree``)."""


@dataclass(frozen=True)
class AttemptFolder:
    """The folders of one attempt: ``root`` holds ``work`` (the program's cwd) and ``io`` (agl's files)."""

    root: Path
    work: Path
    io: Path
    git_repo: Path | None = None


async def _git(repo: Path, *args: str) -> None:
    process = await asyncio.create_subprocess_exec(
        "git",
        "-C",
        str(repo),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), _GIT_TIMEOUT_SECONDS)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise WorkFolderError(
            f"git {' '.join(args)} in {repo} took over {_GIT_TIMEOUT_SECONDS:.0f} s."
        ) from None
    if process.returncode != 0:
        text = output.decode("utf-8", errors="replace").strip()[-2000:]
        raise WorkFolderError(f"git {' '.join(args)} in {repo} failed ({process.returncode}): {text}")


async def make_attempt_folder(
    rollout_id: str,
    attempt_id: str,
    *,
    root: Path | None = None,
    template: Path | None = None,
    git_repo: Path | None = None,
    git_ref: str = "HEAD",
) -> AttemptFolder:
    """Create the folders of one attempt (``template`` copied, or a detached worktree of ``git_repo``).

    Raises:
        WorkFolderError: the template or repository is missing, or ``git worktree add`` failed.
    """
    if template is not None and git_repo is not None:
        raise ValueError("Give a template folder or a git repository for the working folder, not both.")
    if template is not None and not template.is_dir():
        raise WorkFolderError(f"The template folder {template} does not exist (or is not a folder).")
    prefix = _UNSAFE.sub("_", f"agl-{rollout_id}-{attempt_id}-")[:96]
    folder_root = Path(tempfile.mkdtemp(prefix=prefix, dir=None if root is None else str(root)))
    work, io = folder_root / "work", folder_root / "io"
    io.mkdir()
    try:
        if template is not None:
            await asyncio.to_thread(shutil.copytree, template, work, symlinks=True)
        elif git_repo is not None:
            await _git(git_repo, "worktree", "add", "--detach", str(work), git_ref)
        else:
            work.mkdir()
    except BaseException:
        await asyncio.to_thread(shutil.rmtree, folder_root, True)
        raise
    return AttemptFolder(folder_root, work, io, git_repo)


async def remove_attempt_folder(folder: AttemptFolder) -> None:
    """Delete the attempt's folders (and unregister its git worktree); failures are logged, not raised."""
    if folder.git_repo is not None:
        try:
            await _git(folder.git_repo, "worktree", "remove", "--force", str(folder.work))
        except WorkFolderError as exc:
            logger.warning("Could not remove the git worktree %s: %s", folder.work, exc)
    await asyncio.to_thread(shutil.rmtree, folder.root, True)
