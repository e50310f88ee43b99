"""Workshop rooms: a presenter's room that collects every learner's sentence (or vote) in one shared store.

``settings`` reads the room limits and where rooms are stored; ``rooms`` holds what a room and an entry are, the store
interface and the rules (codes, secrets, limits, moderation); ``sqlite_store`` and ``redis_store`` are its two back
ends; ``placement`` and ``votes`` compute what a room shows. No Streamlit here.
"""
