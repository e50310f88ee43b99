"""Writing the view's URL in the browser with ``history.replaceState``, so option changes add no history entries.

Streamlit pushes a browser-history entry for every ``st.query_params`` write (its frontend calls
``history.pushState`` whenever the query string changes), so Back would walk through option changes instead
of pages. ``ui.page_state`` therefore does not write ``st.query_params``: at the end of a run it hands the query
string the view should have to this small component (``st.components.v2``, public API), whose script replaces
the current history entry's URL. Page switches through the navigation still push one entry (Streamlit does that
itself), so Back and Forward move between pages.

The component never reruns the app (it sets no state) and takes no room (``VIEW_URL_CSS`` hides it, a rule of
``ui.explain.PAGE_CSS``). Several instances can be on the page (the page's own, and a fragment's after the
fragment reran alone); each write carries the session's token and a number that grows with every write, and the
script applies only a newer write, so an instance drawn again with old data (say, while Back is taking the
browser to another page) never puts back an old URL.
"""

from __future__ import annotations

import streamlit as st

VIEW_URL_KEY = "view-url"  # the page's instance; a fragment's is "view-url-<fragment>"
VIEW_URL_CSS = f'[class*="st-key-{VIEW_URL_KEY}"] {{ display: none; }}'  # a rule of ui.explain.PAGE_CSS

# ``documentElement.dataset.viewUrl`` remembers the last write applied ("<session> <number>").
VIEW_URL_JS = """
export default function (component) {
  const { data } = component;
  if (!data || typeof data.query !== 'string') return;
  const root = document.documentElement;
  const [session, seq] = (root.dataset.viewUrl || ' -1').split(' ');
  if (session === data.session && Number(seq) >= data.seq) return;
  root.dataset.viewUrl = `${data.session} ${data.seq}`;
  // Streamlit's own embedding parameters (?embed=true, ?embed_options=dark_theme) stay as they are: the server never
  // sees them as options. Streamlit's page navigation drops them unless embed=true, so the ones this tab was opened
  // with are remembered and written again (a dark link stays dark from page to page).
  const kept = new URLSearchParams(location.search);
  let embed = ['embed', 'embed_options'].flatMap((name) => kept.getAll(name).map((value) => [name, value]));
  if (embed.length) root.dataset.embedParams = new URLSearchParams(embed).toString();
  else if (root.dataset.embedParams) embed = [...new URLSearchParams(root.dataset.embedParams)];
  const query = [data.query, new URLSearchParams(embed).toString()].filter(Boolean).join('&');
  const search = query ? '?' + query : '';
  if (location.search !== search) {
    history.replaceState(history.state, '', location.pathname + search + location.hash);
  }
}
"""

_writer = st.components.v2.component("view_url", js=VIEW_URL_JS)


def write_view_url(query: str, *, session: str, seq: int, key: str = VIEW_URL_KEY) -> None:
    """Mount the writer: the browser's current history entry gets ``?query`` (no ``?`` when empty) unless a newer
    write of this ``session`` (a larger ``seq``) was applied already."""
    _writer(key=key, data={"query": query, "session": session, "seq": seq})
