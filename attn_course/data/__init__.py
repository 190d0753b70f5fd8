"""The course's data: the reversal and toy-French tasks, the Tatoeba pairs and their tokenizer,
vocabularies and batches.
"""
