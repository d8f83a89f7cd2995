"""One module per measured scenario; each returns report Sections of Rows."""
