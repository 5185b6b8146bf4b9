"""Hardware and model physics: the GPU and model catalog (``catalog``), the one roofline every hardware
figure comes from (``roofline``), and ``estimate`` for one request shape."""
