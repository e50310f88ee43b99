"""What ``make run`` starts: the app (``app.py``) served by Streamlit, with the bundled model loaded as the server starts.

``streamlit run app.py`` works too; it loads the model when the first visitor arrives instead.
"""

from contextlib import asynccontextmanager

import streamlit as st


@asynccontextmanager
async def lifespan(_app):
    import logging

    from ui.warmup import start_warmup

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    start_warmup()
    yield


app = st.App("app.py", lifespan=lifespan)
