"""trinity's own advantage estimators and policy losses, one module per algorithm family, each as Trinity-RFT
0.6.0 defines it.

Importing a module registers its estimators with verl's advantage-estimator registry and its losses with
`functions.own_loss`, each by its entry's key in trinity/config/algorithms (the entry carries the registry name);
the trainer binds a loss to the run's arguments and registers it in verl's policy-loss registry
(`functions.prepare`). Group estimators take `index` (the task each rollout answers), or `episodes` (the batch's
episodes and their steps, `_episodes.py`).
"""
