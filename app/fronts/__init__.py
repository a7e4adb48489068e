"""The fronts over the engine: the command line, the HTTP API, the MCP server and the LangChain
adapters. Each builds one `Filters` record and the options, asks the engine, and maps its typed
errors; none holds question logic of its own."""
