from typing import Literal

import dspy


class JudgeUsefulness(dspy.Signature):
    """Rate how useful the answer is as a response to the question (IsUse), regardless of evidence.

    5: complete, direct and informative. 4: mostly complete. 3: acceptable but thin or partly off.
    2: barely addresses the question. 1: off-topic, evasive or empty."""

    question: str = dspy.InputField()
    answer: str = dspy.InputField()
    usefulness: Literal[1, 2, 3, 4, 5] = dspy.OutputField()
