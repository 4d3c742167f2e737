"""A DSPy program as its docs write one: ``dspy.configure(lm=...)``, then a ``Predict`` module. No agl import.

``cache=False``: DSPy caches answers on disk by default, so a repeated question would reach no model.
"""

from __future__ import annotations

import dspy


def answer_question(question: str, *, model: str, base_url: str, api_key: str) -> str:
    """Configure DSPy (as its docs do, in the calling thread) and predict the answer."""
    dspy.configure(lm=dspy.LM(f"openai/{model}", api_base=base_url, api_key=api_key, cache=False))
    predict = dspy.Predict("question -> answer")
    return str(predict(question=question).answer)
