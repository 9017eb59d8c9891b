"""mempager: a memory pager for LLM agents."""
