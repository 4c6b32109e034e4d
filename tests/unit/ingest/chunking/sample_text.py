"""Builders of long, awkward test text for the chunking tests."""

from __future__ import annotations

PROSE_SENTENCES = [
    "Couriers confirm the delivery address before they leave the restaurant.",
    "If the address is unclear, the courier calls the customer from the app.",
    "Orders are packed in sealed bags so that nobody can open them on the way.",
    "Hot and cold items travel in separate compartments of the delivery box.",
    "A courier may carry up to two orders at once when the restaurants are close together.",
    "Customers can follow the courier on the map from pickup to their door.",
    "Dr. Rao, the head of operations, reviews late orders e.g. those delayed by rain.",
    "The average delivery in 2023 took 31.5 minutes, i.e. a little over half an hour.",
]


def prose(paragraphs: int, sentences_per_paragraph: int, start: int = 0) -> list[str]:
    """Paragraphs of distinct-enough sentences (each ends with a period)."""
    result = []
    index = start
    for _ in range(paragraphs):
        sentences = []
        for _ in range(sentences_per_paragraph):
            base = PROSE_SENTENCES[index % len(PROSE_SENTENCES)]
            sentences.append(f"Rule {index}: {base}")
            index += 1
        result.append(" ".join(sentences))
    return result


def long_table(rows: int = 60) -> str:
    lines = ["| Code | Meaning | What to do |", "| --- | --- | --- |"]
    for i in range(rows):
        lines.append(
            f"| E{1000 + i} | The payment gateway timed out while confirming order {40000 + i} "
            f"| Retry the payment or choose another method |"
        )
    return "\n".join(lines)


def long_code(functions: int = 60) -> str:
    lines = ["```python"]
    for i in range(functions):
        lines.append(f"def refund_rule_{i}(order, policy):")
        lines.append(f"    return order.total * policy.rate_{i} if order.late else 0")
    lines.append("```")
    return "\n".join(lines)


def long_sentence(words: int = 400) -> str:
    vocabulary = "the refund for a late order is paid to the original payment method and"
    vocabulary = vocabulary.split()
    return " ".join(vocabulary[i % len(vocabulary)] + str(i) for i in range(words)) + "."
