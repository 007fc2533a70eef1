#!/usr/bin/perl

# The status page's pictures in headless Chromium (Debian package
# chromium): per provider attempts per second, failed share and latency
# over the last minutes and a breaker timeline, drawn as inline SVG by the
# page's own script from GET /api/monitoring/timeseries; the charts in the
# DOM are not empty, a screenshot shows their colours; a terminal state is
# badged as needing an operator; the CSP allows the page's script and
# style by hash, no 'unsafe-inline'.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Compress::Zlib;
use Digest::SHA qw(sha256_base64);
use Time::HiRes qw(sleep);
use OmniTest;

my $chromium = `command -v chromium 2>/dev/null`;
chomp $chromium;

OmniTest::need($chromium, 'chromium not installed (Debian package chromium)');

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'charts-0123456789-abcdef';

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$t->write_file('key-a1', "sk-a1~status=503\n");
$t->write_file('key-b1', "sk-b1~delay=40\n");
$t->write_file('key-x1', "sk-x1~status=402,body=credit%20balance%20is%20too%20low\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=local cooldown_base=1ms;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;
    omniroute_provider xeta url=http://127.0.0.1:%%PORT_mock_p%%/xeta;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection b1 provider=beta key_file=%%TESTDIR%%/key-b1;
    omniroute_connection x1 provider=xeta key_file=%%TESTDIR%%/key-x1;

    omniroute_combo smart alpha/m1 beta/m2;
    omniroute_combo broke xeta/m beta/m2;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /ops/ {
            omniroute_api prefix=/ops;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));
my $port = $t->port('gw');

# traffic over a few seconds: alpha fails (its breaker opens), beta serves
for my $i (1 .. 6) {
    $t->post($port, '/v1/chat/completions', { model => 'smart' });
    $t->post($port, '/v1/chat/completions', { model => 'beta/m' });
    sleep(0.4);
}
$t->post($port, '/v1/chat/completions', { model => 'broke' });

# the JSON the page draws
my $r = $t->get($port, '/ops/api/monitoring/timeseries',
                Authorization => "Bearer $TOKEN");
is($r->{status}, 200, 'timeseries: 200');
my $ts = eval { decode_json($r->{body}) } // {};
is($ts->{seconds}, 300, 'five minutes of seconds');
is(scalar @{$ts->{providers}{beta}{attempts} // []}, 300, 'one value each');
my $sum = 0;
$sum += $_ for @{$ts->{providers}{beta}{attempts}};
is($sum, 13, 'beta\'s 13 attempts are in the ring');
my $err = 0;
$err += $_ for @{$ts->{providers}{alpha}{errors}};
cmp_ok($err, '>=', 2, 'alpha\'s failures too');
ok((grep { defined && $_ >= 40 } @{$ts->{providers}{beta}{latency_ms}}),
   'beta\'s latency (the mock waits 40 ms)');
ok((grep { $_->{to} eq 'OPEN' } @{$ts->{breakers}{alpha} // []}),
   'alpha\'s breaker timeline has its OPEN');

$r = $t->get($port, '/ops/api/monitoring/timeseries?seconds=60',
             Authorization => "Bearer $TOKEN");
is(scalar @{(eval { decode_json($r->{body}) } // {})->{providers}{beta}{attempts} // []},
   60, '?seconds=60');
$r = $t->get($port, '/ops/api/monitoring/timeseries?seconds=0',
             Authorization => "Bearer $TOKEN");
is($r->{status}, 400, '?seconds=0: 400');
$r = $t->get($port, '/ops/api/monitoring/timeseries');
is($r->{status}, 401, 'the token is needed');

# the page and its policy
$r = $t->get($port, '/ops/status');
my $csp = $r->{headers}{'content-security-policy'} // '';
unlike($csp, qr/unsafe-inline/, 'the CSP has no unsafe-inline');
my ($script) = $r->{body} =~ m{<script>(.*?)</script>}s;
my ($style) = $r->{body} =~ m{<style>(.*?)</style>}s;
my $sh = sha256_base64($script // '');
$sh .= '=' while length($sh) % 4;
my $ch = sha256_base64($style // '');
$ch .= '=' while length($ch) % 4;
like($csp, qr/script-src 'sha256-\Q$sh\E'/, 'the script is allowed by its hash');
like($csp, qr/style-src 'sha256-\Q$ch\E'/, 'the style by its hash');
unlike($r->{body}, qr/<[^>]+ (?:on\w+|style)=/i,
       'no inline event handler or style attribute');

sub chromium {
    my ($name, @args) = @_;

    my $profile = $t->dir . "/chromium-$name";
    my $log = $t->dir . "/chromium-$name.log";
    my $url = "http://127.0.0.1:$port/ops/status#token=$TOKEN";

    my $out = `timeout 120 $chromium --headless --no-sandbox --disable-gpu \\
        --disable-background-networking --disable-component-update \\
        --disable-sync --disable-dev-shm-usage --no-first-run \\
        --hide-scrollbars --user-data-dir=$profile \\
        --enable-logging=stderr --v=0 --virtual-time-budget=8000 \\
        @args '$url' 2>$log`;

    my @console = grep { /:CONSOLE|Content.Security.Policy|Refused/ }
                  split /\n/, $t->read_file($log);

    return ($out, \@console);
}

my ($dom, $console) = chromium('dom', '--dump-dom');

like($dom, qr/<body[^>]*data-loaded="1"/, 'the page loaded its data');
is(scalar @$console, 0, 'no console message, no CSP violation')
    or diag(join("\n", @$console));

# each chart: an <svg data-chart> with a non-empty path
sub svg_of {
    my ($chart, $provider) = @_;
    my ($svg) = $dom =~ m{(<svg[^>]*data-chart="$chart"[^>]*data-provider="$provider".*?</svg>)}s;
    return $svg // '';
}

for my $p (qw(alpha beta)) {
    for my $c (qw(attempts errors latency)) {
        my $svg = svg_of($c, $p);
        like($svg, qr{<path class="line" d="M[\d.]+ [\d.]+(?:[ML][\d.]+ [\d.]+)*"},
             "$p: the $c chart has its line");
    }
}

my ($bsum) = svg_of('attempts', 'beta') =~ /data-sum="([\d.]+)"/;
is($bsum, 13, 'beta\'s attempts chart sums its 13 attempts');
my ($points) = svg_of('latency', 'beta') =~ /data-points="(\d+)"/;
cmp_ok($points // 0, '>=', 2, 'beta\'s latency has points in several seconds');
my ($emax) = svg_of('errors', 'alpha') =~ /data-max="([\d.]+)"/;
is($emax, 100, 'alpha failed all its attempts in some second: 100 %');

my $tl = svg_of('breaker', 'alpha');
like($tl, qr/<rect class="seg CLOSED"[^>]*data-state="CLOSED"/,
     'alpha\'s timeline starts CLOSED');
like($tl, qr/<rect class="seg (?:OPEN|HALF_OPEN)"/,
     'and shows it OPEN (or HALF_OPEN) since');
like(svg_of('breaker', 'beta'), qr/<rect class="seg CLOSED"/,
     'beta CLOSED all along');

like($dom, qr/<tr data-connection="x1"[^>]*><td>x1<\/td><td>xeta<\/td><td><span class="badge terminal" title="needs an operator[^"]*">credits_exhausted<\/span>/,
     'a terminal state is badged as needing an operator');
like($dom, qr/<span class="operator">0 active, 0 cooling, 1 terminal<\/span>/,
     'and its provider\'s connections are marked');
like($dom, qr{<table id="leases">.*?no active leases}s,
     'the exclusive leases table (none here)');
unlike($dom, qr/\Q$TOKEN\E/, 'the token is not in the page');

# a screenshot: the chart colours are on it
my $png = $t->dir . '/status.png';
chromium('shot', "--screenshot=$png", '--window-size=1000,760');
ok(-s $png, 'a screenshot was taken') or diag(`ls -l $png 2>&1`);

my $img = png_read($png);
ok($img, 'a PNG we can read');

SKIP: {
    skip 'no screenshot', 3 unless $img;

    is($img->{width}, 1000, 'at the window\'s width');
    my $blue = png_count($img, [0x1f, 0x6f, 0xb2]);
    my $purple = png_count($img, [0x6a, 0x3f, 0xb5]);
    cmp_ok($blue, '>', 50, "the attempts lines are drawn ($blue pixels)");
    cmp_ok($purple, '>', 20, "the latency lines are drawn ($purple pixels)");
}

$t->done;

done_testing;


# a PNG (8-bit RGB or RGBA, not interlaced) as rows of bytes
sub png_read {
    my ($file) = @_;

    open my $fh, '<:raw', $file or return undef;
    local $/;
    my $d = <$fh>;
    close $fh;

    return undef unless substr($d, 0, 8) eq "\x89PNG\r\n\x1a\n";

    my ($pos, $w, $h, $depth, $ctype, $il, $idat) = (8, 0, 0, 0, 0, 0, '');

    while ($pos + 8 <= length $d) {
        my ($len, $type) = unpack('N a4', substr($d, $pos, 8));
        my $data = substr($d, $pos + 8, $len);
        ($w, $h, $depth, $ctype, undef, undef, $il) = unpack('N N C C C C C', $data)
            if $type eq 'IHDR';
        $idat .= $data if $type eq 'IDAT';
        $pos += 12 + $len;
    }

    return undef unless $depth == 8 && !$il && ($ctype == 2 || $ctype == 6);

    my $bpp = $ctype == 6 ? 4 : 3;
    my $raw = uncompress($idat) // return undef;
    my $stride = $w * $bpp;
    my (@rows, $prev);
    $prev = "\0" x $stride;

    for my $y (0 .. $h - 1) {
        my $off = $y * ($stride + 1);
        my $f = ord substr($raw, $off, 1);
        my @c = unpack('C*', substr($raw, $off + 1, $stride));
        my @p = unpack('C*', $prev);

        if ($f == 1) {
            $c[$_] = ($c[$_] + $c[$_ - $bpp]) & 0xff for $bpp .. $#c;
        } elsif ($f == 2) {
            $c[$_] = ($c[$_] + $p[$_]) & 0xff for 0 .. $#c;
        } elsif ($f == 3) {
            for my $i (0 .. $#c) {
                my $a = $i >= $bpp ? $c[$i - $bpp] : 0;
                $c[$i] = ($c[$i] + (($a + $p[$i]) >> 1)) & 0xff;
            }
        } elsif ($f == 4) {
            for my $i (0 .. $#c) {
                my $a = $i >= $bpp ? $c[$i - $bpp] : 0;
                my $b = $p[$i];
                my $cc = $i >= $bpp ? $p[$i - $bpp] : 0;
                my $pp = $a + $b - $cc;
                my ($pa, $pb, $pc) = (abs($pp - $a), abs($pp - $b), abs($pp - $cc));
                my $pr = ($pa <= $pb && $pa <= $pc) ? $a : ($pb <= $pc) ? $b : $cc;
                $c[$i] = ($c[$i] + $pr) & 0xff;
            }
        }

        $prev = pack('C*', @c);
        push @rows, $prev;
    }

    return { width => $w, height => $h, bpp => $bpp, rows => \@rows };
}

# pixels within a small distance of a colour
sub png_count {
    my ($img, $rgb) = @_;
    my $n = 0;
    for my $row (@{$img->{rows}}) {
        my @c = unpack('C*', $row);
        for (my $i = 0; $i < @c; $i += $img->{bpp}) {
            $n++ if abs($c[$i] - $rgb->[0]) + abs($c[$i + 1] - $rgb->[1])
                    + abs($c[$i + 2] - $rgb->[2]) < 40;
        }
    }
    return $n;
}
