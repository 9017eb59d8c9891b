"""``mempager serve``: the pager as an MCP server. Takes an opened Pager; never imports the CLI."""
