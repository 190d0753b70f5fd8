"""Chapter 10's training: its one TrainConfig reaches the loop whole, through `chapters.fit`."""

from attn_course.course import chapters, diagnosis_study


def test_fit_trains_with_the_chapters_training_config_and_without_validation():
    data = chapters.reversal_data(40, min_len=4, max_len=7, vocab_size=5)   # 32 pairs: one batch of 64
    model = diagnosis_study.build(data, 1)
    history = diagnosis_study.fit(model, data, 1)
    training = diagnosis_study.TRAINING
    assert len(history.train_loss) == len(history.step_loss) == training.epochs and history.val_loss == []
    assert history.lr == [training.lr] * training.epochs and not model.training


def test_the_chapters_data_is_its_task_config():
    task = diagnosis_study.TASK
    assert (task.task, task.num_pairs, task.min_len, task.max_len) == ("translation", 3000, 3, 10)
