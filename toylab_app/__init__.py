"""Page-side code: the sidebar, the header, one module per tab, and the cached computations they share."""
