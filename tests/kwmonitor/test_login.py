import pytest


@pytest.mark.django_db
def test_login_page_logs_a_user_in_and_follows_next(client, user):
    page = client.get("/accounts/login/?next=/admin/")
    assert page.status_code == 200 and "kwmonitor" in page.content.decode()
    response = client.post("/accounts/login/", {"username": "ann", "password": "ann-password-1", "next": "/queries/1/"})
    assert response.status_code == 302 and response["Location"] == "/queries/1/"
    bad = client.post("/accounts/login/", {"username": "ann", "password": "wrong"})
    assert bad.status_code == 200 and "Please enter a correct username and password" in bad.content.decode()
