"""The supervisor's tools in the agent frameworks of asyncio programs: each from an
asyncio supervisor (:func:`supervisor.asyncio.open_supervisor`), each call through the
supervisor's gate (validation, approval, history, audit, tracing), each following the
live catalog as servers fail and come back.

- :mod:`supervisor.frameworks.langchain` — ``SupervisorToolkit``: LangChain
  ``StructuredTool``\\ s (``mcp-supervisor[langchain]``: ``langchain-core``);
- :mod:`supervisor.frameworks.openai_agents` — ``SupervisedMCPServer``: an
  ``MCPServer`` of the OpenAI Agents SDK (``mcp-supervisor[openai-agents]``);
- :mod:`supervisor.frameworks.pydantic_ai` — ``SupervisorToolset``: a PydanticAI
  toolset (``mcp-supervisor[pydantic-ai]``).

Each module imports its framework, and only it; this package imports none. A failed call
is an answer for the model, in the framework's own terms, saying what failed and whether
the call may have run.
"""
