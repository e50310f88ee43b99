"""What the server sent after one click: the ForwardMsgs a tab received over Streamlit's websocket.

Used to check that a control inside an ``st.fragment`` reruns only its fragment: the run ends as
a fragment run, and no figure outside the fragment is sent again.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Reply:
    """The messages one click brought: whether the run was a fragment run, and the figures it (re)sent."""

    fragment_run: bool = False
    full_run: bool = False
    figure_titles: list[str] = field(default_factory=list)
    bytes: int = 0
    elements: list[str] = field(default_factory=list)  # element types sent in full
    references: int = 0  # elements the browser had cached, sent as a reference to it (``ref_hash``)


class Recorder:
    """Decodes every binary websocket frame the page receives from the moment of ``start``."""

    def __init__(self, page):
        self.frames: list[bytes] = []
        self.recording = False
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        if self.recording and isinstance(payload, bytes):
            self.frames.append(payload)

    def start(self) -> None:
        self.frames, self.recording = [], True

    def reply_frames(self) -> list[bytes]:
        """The frames received since ``start`` (recording stops)."""
        self.recording = False
        return list(self.frames)

    def reply(self) -> Reply:
        import json

        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.recording = False
        reply = Reply(bytes=sum(len(f) for f in self.frames))
        for frame in self.frames:
            msg = ForwardMsg()
            msg.ParseFromString(frame)
            kind = msg.WhichOneof("type")
            if kind == "script_finished":
                reply.fragment_run |= msg.script_finished == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
                reply.full_run |= msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                reply.elements.append(element.WhichOneof("type"))
                if element.WhichOneof("type") == "plotly_chart":
                    spec = json.loads(element.plotly_chart.spec or "{}")
                    title = spec.get("layout", {}).get("title", {})
                    reply.figure_titles.append(title.get("text", "") if isinstance(title, dict) else str(title))
            elif kind == "ref_hash":  # a message the browser has cached, sent by reference: still a resend
                reply.figure_titles.append(f"<cached message {msg.ref_hash[:8]}>")
                reply.references += 1
        return reply
