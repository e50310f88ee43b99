"""Workshop room: a presenter opens a room, learners send sentences (or votes), the projector shows them all, live."""

import streamlit as st

from ui.room_page import room_page

st.title("Workshop room")
room_page()
