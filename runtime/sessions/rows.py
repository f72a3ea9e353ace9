"""A conversation as rows, for every SQL backend: what ``load`` reads and ``save`` writes.

Functions here take ``db`` (an object with ``execute(sql, params)`` whose SQL
uses ``?`` placeholders) inside a transaction the caller opened. Views are
append-only, so saving a conversation inserts only the messages past what is
stored (``stored``: adapter -> count) and rewrites the small rest: pending
summaries and the touched turn rows.
"""

from __future__ import annotations

import json
import time
from typing import Any

from mol.core.errors import SessionConflict, SessionNotFound
from mol.runtime.sessions.base import SessionInfo, TurnLog
from mol.runtime.views import Conversation, TurnRecord

TURN_COLUMNS = ("idx, status, adapter, user_text, answer, summary, summary_ok, route_raw, "
                "route_fallback, tools")


def load(db: Any, session_id: str, where: str) -> Conversation:
    """The stored conversation ``session_id`` (``where`` names the store in errors)."""
    row = db.execute("SELECT state, revision FROM sessions WHERE id = ?",
                     (session_id,)).fetchone()
    if row is None:
        raise SessionNotFound(f"no session {session_id!r} in {where} (see 'mol sessions list')")
    state = json.loads(row[0])
    views: dict[str, list[dict[str, Any]]] = {}
    for adapter, body in db.execute("SELECT adapter, body FROM messages WHERE session_id = ? "
                                    "ORDER BY adapter, idx", (session_id,)):
        views.setdefault(adapter, []).append(json.loads(body))
    turns = [_record(r) for r in db.execute(
        f"SELECT {TURN_COLUMNS} FROM turns WHERE session_id = ? ORDER BY idx", (session_id,))]
    return Conversation(id=session_id, views=views, pending=state.get("pending", {}),
                        turns=turns, notes=state.get("notes", {}),
                        compactions=state.get("compactions", {}),
                        measures=state.get("measures", {}),
                        approvals=state.get("approvals", {}),
                        asked=state.get("asked", {}),
                        segments=state.get("segments", []), revision=row[1])


def save(db: Any, conversation: Conversation, record: TurnRecord | None, log: TurnLog,
         parent: str | None, stored: dict[str, int], turns: bool = True) -> dict[str, int]:
    """Write the conversation at ``conversation.revision + 1`` with ``record`` (every turn
    when None; none when ``turns`` is false; only ``record`` carries ``log``'s usage and
    events); returns the stored view lengths. ``SessionConflict`` when another writer moved
    the revision first."""
    now = time.time()
    digest = log.hcp_digest or None
    state = json.dumps({"pending": conversation.pending, "notes": conversation.notes,
                        "compactions": conversation.compactions,
                        "measures": conversation.measures,
                        "approvals": conversation.approvals,
                        "asked": conversation.asked,
                        "segments": conversation.segments}, ensure_ascii=False)
    revision = conversation.revision
    if revision == 0:
        exists = db.execute("SELECT revision FROM sessions WHERE id = ?",
                            (conversation.id,)).fetchone()
        if exists is not None:
            raise SessionConflict(f"session {conversation.id!r} already exists (revision "
                                  f"{exists[0]}); it was created elsewhere meanwhile")
        db.execute("INSERT INTO sessions (id, created, updated, hcp_digest, parent, state, "
                   "revision) VALUES (?, ?, ?, ?, ?, ?, 1)",
                   (conversation.id, now, now, digest or "", parent, state))
    else:
        moved = db.execute("UPDATE sessions SET updated = ?, hcp_digest = COALESCE(?, "
                           "hcp_digest), state = ?, revision = revision + 1 WHERE id = ? AND "
                           "revision = ?", (now, digest, state, conversation.id,
                                            revision)).rowcount
        if moved != 1:
            raise SessionConflict(f"session {conversation.id!r} changed elsewhere since "
                                  f"revision {revision}; reload it and retry")
    lengths = _append_messages(db, conversation, stored)
    for turn in [] if not turns else [record] if record is not None else conversation.turns:
        turn_log = log if turn is record else TurnLog(log.hcp_digest)
        db.execute(f"INSERT INTO turns (session_id, {TURN_COLUMNS}, hcp_digest, usage, events, "
                   f"updated) VALUES (?, {', '.join('?' * 14)}) ON CONFLICT (session_id, idx) "
                   "DO UPDATE SET status = excluded.status, adapter = excluded.adapter, "
                   "user_text = excluded.user_text, answer = excluded.answer, "
                   "summary = excluded.summary, summary_ok = excluded.summary_ok, "
                   "route_raw = excluded.route_raw, route_fallback = excluded.route_fallback, "
                   "tools = excluded.tools, hcp_digest = excluded.hcp_digest, "
                   "usage = excluded.usage, events = excluded.events, "
                   "updated = excluded.updated",
                   (conversation.id, *_row(turn), turn_log.hcp_digest,
                    json.dumps(turn_log.usage or {}),
                    json.dumps(turn_log.events or [], ensure_ascii=False), now))
    return lengths


def _append_messages(db: Any, conversation: Conversation,
                     stored: dict[str, int]) -> dict[str, int]:
    lengths = {}
    for adapter, view in conversation.views.items():
        start = stored.get(adapter)
        if start is None:  # not known to this process: ask (another replica may have written)
            start = db.execute("SELECT COUNT(*) FROM messages WHERE session_id = ? AND "
                               "adapter = ?", (conversation.id, adapter)).fetchone()[0]
        for index in range(start, len(view)):
            db.execute("INSERT INTO messages (session_id, adapter, idx, body) VALUES "
                       "(?, ?, ?, ?) ON CONFLICT (session_id, adapter, idx) DO NOTHING",
                       (conversation.id, adapter, index,
                        json.dumps(view[index], ensure_ascii=False)))
        lengths[adapter] = max(start, len(view))
    return lengths


def put_mark(db: Any, keys: tuple[str, ...], session_id: str, mark: str,
             response: tuple[str | None, str] | None) -> None:
    """Name a point by each of ``keys``; store the response under the first once
    (immutable)."""
    for key in keys:
        db.execute("INSERT INTO marks (key, session_id, mark, created) VALUES (?, ?, ?, ?) "
                   "ON CONFLICT (key) DO UPDATE SET session_id = excluded.session_id, "
                   "mark = excluded.mark", (key, session_id, mark, time.time()))
    if response is not None:
        db.execute("INSERT INTO responses (id, session_id, previous_id, created, body) "
                   "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                   (keys[0], session_id, response[0], time.time(), response[1]))


def move_marks(db: Any, session_id: str, old: dict[str, Any], new: str) -> int:
    """Rewrite the marks of ``session_id`` naming the point ``old`` to ``new`` (JSON); how
    many. Marks are compared as data: two processes may order a mark's keys differently."""
    found = db.execute("SELECT key, mark FROM marks WHERE session_id = ?",
                       (session_id,)).fetchall()
    moved = [key for key, mark in found if json.loads(mark) == old]
    for key in moved:
        db.execute("UPDATE marks SET mark = ? WHERE key = ?", (new, key))
    return len(moved)


def asking(db: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """Session id -> its calls left open for a person's answer (``Conversation.asked``,
    those not ended), for the sessions with a waiting turn (their state only is read)."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for session_id, state in db.execute(
            "SELECT s.id, s.state FROM sessions s WHERE EXISTS (SELECT 1 FROM turns t WHERE "
            "t.session_id = s.id AND t.status = 'waiting')").fetchall():
        asked = {call_id: entry for call_id, entry in json.loads(state).get("asked", {}).items()
                 if "ended" not in entry}
        if asked:
            found[session_id] = asked
    return found


def sessions(db: Any, limit: int) -> list[SessionInfo]:
    """The most recently updated sessions, newest first."""
    rows = db.execute(
        "SELECT s.id, s.created, s.updated, s.hcp_digest, "
        "(SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id), "
        "(SELECT status FROM turns t WHERE t.session_id = s.id ORDER BY idx DESC LIMIT 1) "
        "FROM sessions s ORDER BY s.updated DESC LIMIT ?", (limit,)).fetchall()
    return [SessionInfo(r[0], r[1], r[2], r[4], r[3], r[5] or "") for r in rows]


def turn_logs(db: Any, session_id: str) -> list[dict[str, Any]]:
    """Per turn: the HCP digest, usage and recorded events."""
    rows = db.execute("SELECT idx, hcp_digest, usage, events FROM turns "
                      "WHERE session_id = ? ORDER BY idx", (session_id,)).fetchall()
    return [{"index": r[0], "hcp_digest": r[1], "usage": json.loads(r[2]),
             "events": json.loads(r[3])} for r in rows]


def _row(turn: TurnRecord) -> tuple[Any, ...]:
    return (turn.index, turn.status, turn.adapter, turn.user, turn.answer, turn.summary,
            int(turn.summary_ok), turn.route_raw, int(turn.route_fallback),
            json.dumps(turn.tools))


def _record(row: tuple[Any, ...]) -> TurnRecord:
    return TurnRecord(index=row[0], status=row[1], adapter=row[2], user=row[3], answer=row[4],
                      summary=row[5], summary_ok=bool(row[6]), route_raw=row[7],
                      route_fallback=bool(row[8]), tools=json.loads(row[9]))
