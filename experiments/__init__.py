"""Small-scale seeded experiments that decide the documents' training claims (issue 15).

``harness`` runs an experiment over seeds and decides its pre-registered prediction; ``models`` builds
tiny Transformers from ``impl/`` blocks; ``tasks`` generates seeded synthetic tasks; one module per
family holds its experiments, and ``test_<family>.py`` its evidence.
"""
