"""agents/codegen: the LangGraph synthesis team and the task synthesis it calls."""
